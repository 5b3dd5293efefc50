package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// decodeJSON decodes one JSON value as the schema validator wants it.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %w", err)
	}
	return v, nil
}
