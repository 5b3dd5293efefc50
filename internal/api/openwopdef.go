package api

import (
	"encoding/json"
	"net/http"

	"github.com/packrun/packrun/host"
)

// decodeOpenwopWorkflow decodes the body of POST /v1/openwop/workflows:
// an openwop workflow definition as openwop publishes it (it has an
// "id"; host.OpenwopDefinition, checked and turned into what packrun
// runs by host.OpenwopFromDefinition), or packrun's own
// {workflowId, nodes} (host.OpenwopWorkflow). Both are decoded strictly:
// an unknown field is refused, naming it.
func decodeOpenwopWorkflow(r *http.Request, b []byte) (*host.OpenwopWorkflow, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, refuse(http.StatusBadRequest, CodeBadRequest, "", "request body is not a JSON object")
	}
	if _, published := keys["id"]; !published {
		var def host.OpenwopWorkflow
		if err := decodeStrict(b, &def); err != nil {
			return nil, err
		}
		if err := refuseTenantField(r, "tenant", def.Tenant); err != nil {
			return nil, err
		}
		return &def, nil
	}
	var d host.OpenwopDefinition
	if err := decodeStrict(b, &d); err != nil {
		return nil, err
	}
	if err := refuseTenantField(r, "tenantId", d.TenantID); err != nil {
		return nil, err
	}
	w, err := host.OpenwopFromDefinition("put openwop workflow", &d)
	if err != nil {
		return nil, err
	}
	w.Tenant = d.TenantID
	return w, nil
}
