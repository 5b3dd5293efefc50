package message

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// The payload rules of every topic the AICO message formats document. A topic's
// required members are its id field and the fields of its "Field
// Descriptions" list; the members inside them are checked when present.

var busNoLimit = math.NaN()

// busTopics maps a documented topic to its payload rules.
var busTopics = map[string]func(o *busObj, version string){
	"crisis.detection":                busCrisisDetection,
	"agency.initiative":               busAgencyInitiative,
	"expression.coordination":         busExpressionCoordination,
	"learning.coordination":           busLearningCoordination,
	"personality.expression.decision": busPersonalityDecision,
	"llm.conversation.events":         busConversationEvents,
	"llm.prompt.conditioning.request": busConditioningRequest,
	"llm.prompt.conditioning.response": func(o *busObj, _ string) {
		o.str("request_id")
		o.str("source_module")
		c := o.obj("conditioning_parameters")
		for _, k := range []string{"personality", "emotion", "ethical_boundaries", "prompt_directives"} {
			c.optObj(k)
		}
	},
}

// busValidateTopic applies the rules of topic; undocumented topics keep
// an opaque object payload.
func busValidateTopic(topic, version string, o *busObj) {
	if rules, ok := busTopics[topic]; ok {
		rules(o, version)
	}
}

func busCrisisDetection(o *busObj, _ string) {
	o.str("crisis_id")
	o.num("severity", 0, 1)
	o.num("confidence", 0, 1)
	o.str("crisis_type") // open enum ("etc.")
	d := o.obj("detected_by")
	d.str("module")
	d.optStr("detection_method")
	d.each("detection_signals", false, func(s *busObj) {
		s.str("signal")
		s.optNum("confidence", 0, 1)
	})
	c := o.obj("context")
	c.optStr("conversation_id")
	c.optStr("user_id")
	g := o.obj("response_guidance")
	g.enum("priority", true, "immediate", "high", "moderate")
	g.optStr("protocol")
	g.optStrs("required_actions")
	e := o.obj("escalation_path")
	e.optBool("internal_escalation")
	e.optBool("external_escalation")
	t := o.obj("timeout")
	t.optNum("response_deadline_ms", 0, busNoLimit)
	t.optNum("monitoring_duration_minutes", 0, busNoLimit)
}

func busAgencyInitiative(o *busObj, _ string) {
	o.str("initiative_id")
	o.str("initiative_type") // open enum ("etc.")
	o.num("priority", 0, 1)
	t := o.obj("timing")
	t.optTime("optimal_execution_time")
	t.optTime("expiration_time")
	t.optNum("flexibility", 0, 1)
	o.objs("context", "initiative_content")
	cp := o.obj("coordination_parameters")
	if ep := cp.optObj("execution_parameters"); ep != nil {
		for _, k := range []string{"interruption_threshold", "persistence", "adaptability"} {
			ep.optNum(k, busNoLimit, busNoLimit)
		}
	}
	o.obj("success_metrics")
}

func busExpressionCoordination(o *busObj, _ string) {
	o.str("coordination_id")
	o.enum("expression_type", true, "emotional_response", "personality_expression", "crisis_response")
	o.num("priority", 0, 1)
	s := o.obj("synchronization")
	s.optStr("primary_modality")
	if tp := s.optObj("timing_parameters"); tp != nil {
		for _, k := range []string{"start_time_ms", "duration_ms", "fade_in_ms", "fade_out_ms"} {
			tp.optNum(k, 0, busNoLimit)
		}
	}
	if tr := s.optObj("transition_parameters"); tr != nil {
		tr.enum("transition_curve", false, "natural_sigmoid", "linear", "exponential")
		tr.optNum("transition_speed", 0, 1)
	}
	o.objs("modality_expressions", "coherence_constraints", "adaptive_parameters")
}

func busLearningCoordination(o *busObj, _ string) {
	o.str("learning_event_id")
	o.enum("learning_type", true, "interaction_feedback", "pattern_recognition", "explicit_feedback")
	o.num("priority", 0, 1)
	o.obj("learning_source").optTime("timestamp")
	d := o.obj("learning_data")
	if f := d.optObj("user_feedback"); f != nil {
		if e := f.optObj("explicit"); e != nil {
			e.optNum("rating", 1, 5)
		}
	}
	o.objs("module_learning_directives", "coordination_requirements")
}

// busPersonalityDecision: the spec documents version 1.1, which adds
// ethical_framework; earlier versions are defined elsewhere and keep an
// opaque payload.
func busPersonalityDecision(o *busObj, version string) {
	o.optObj("decision_parameters")
	o.optObj("priority_weights")
	major, minor, _ := strings.Cut(version, ".")
	ma, _ := strconv.Atoi(major)
	mi, _ := strconv.Atoi(minor)
	if ma < 1 || (ma == 1 && mi < 1) {
		return
	}
	f := o.obj("ethical_framework")
	f.each("core_principles", true, func(p *busObj) {
		p.str("principle")
		p.num("importance", busNoLimit, busNoLimit)
		p.optStr("description")
		p.each("boundary_conditions", false, func(b *busObj) {
			b.str("condition")
			b.num("threshold", busNoLimit, busNoLimit)
			b.str("action")
		})
	})
	f.obj("value_conflicts")
	f.obj("disagreement_parameters").each("conditions", false, func(c *busObj) {
		c.str("trigger")
		c.str("response_type")
	})
	f.obj("ethical_reasoning")
}

func busConversationEvents(o *busObj, _ string) {
	o.str("conversation_id")
	o.str("event_type") // open enum ("etc.")
	mp := o.obj("message_pair")
	busChatMessage(mp.obj("user_message"))
	busChatMessage(mp.obj("aico_response"))
	a := o.obj("conversation_analysis")
	if d := a.optObj("conversation_dynamics"); d != nil {
		d.optNum("depth", 0, 1)
	}
	o.objs("personality_feedback", "emotion_feedback", "learning_signals")
}

func busConditioningRequest(o *busObj, _ string) {
	o.str("request_id")
	o.str("conversation_id")
	busChatMessage(o.obj("user_message"))
	o.objs("conversation_context", "detected_user_state")
	r := o.obj("response_parameters")
	r.optStrs("required_conditioning")
	r.optNum("response_deadline_ms", 0, busNoLimit)
	r.enum("priority", false, "low", "medium", "high")
}

func busChatMessage(m *busObj) {
	m.str("text")
	m.optTime("timestamp")
	m.optStr("message_id")
}

// busObj checks the members of one JSON object; the first refusal is
// kept in err (shared by every child) and later checks do nothing.
type busObj struct {
	path string
	m    map[string]any
	err  *RuleError
	root *busObj
}

func (o *busObj) failed() bool { return o.top().err != nil }

func (o *busObj) top() *busObj {
	if o.root != nil {
		return o.root
	}
	return o
}

func (o *busObj) fail(name, rule, format string, args ...any) {
	if !o.failed() {
		o.top().err = busErr(o.path+"."+name, rule, format, args...)
	}
}

// get returns the member name; a missing required member is refused.
func (o *busObj) get(name string, required bool) (any, bool) {
	if o.failed() || o.m == nil {
		return nil, false
	}
	v, ok := o.m[name]
	if !ok && required {
		o.fail(name, "required", "missing")
	}
	return v, ok
}

func (o *busObj) str(name string) string          { return o.string(name, true) }
func (o *busObj) optStr(name string) string       { return o.string(name, false) }
func (o *busObj) num(name string, lo, hi float64) { o.number(name, true, lo, hi) }
func (o *busObj) optNum(name string, lo, hi float64) {
	o.number(name, false, lo, hi)
}
func (o *busObj) obj(name string) *busObj    { return o.object(name, true) }
func (o *busObj) optObj(name string) *busObj { return o.object(name, false) }

// objs requires each of names to be an object.
func (o *busObj) objs(names ...string) {
	for _, n := range names {
		o.object(n, true)
	}
}

func (o *busObj) string(name string, required bool) string {
	v, ok := o.get(name, required)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		o.fail(name, "type", "must be a string")
	case s == "":
		o.fail(name, "required", "empty")
	}
	return s
}

func (o *busObj) enum(name string, required bool, values ...string) {
	s := o.string(name, required)
	if s != "" && !busIn(s, values) {
		o.fail(name, "enum", "%s is not one of %s", busShort(s), strings.Join(values, ", "))
	}
}

func (o *busObj) number(name string, required bool, lo, hi float64) {
	v, ok := o.get(name, required)
	if !ok {
		return
	}
	n, isNum := v.(json.Number)
	if !isNum {
		o.fail(name, "type", "must be a number")
		return
	}
	f, err := n.Float64()
	if err != nil || (!math.IsNaN(lo) && f < lo) || (!math.IsNaN(hi) && f > hi) {
		o.fail(name, "range", "%s is outside %s", busShort(n.String()), busRange(lo, hi))
	}
}

func busRange(lo, hi float64) string {
	if math.IsNaN(hi) {
		return ">= " + strconv.FormatFloat(lo, 'f', -1, 64)
	}
	return strconv.FormatFloat(lo, 'f', 1, 64) + "-" + strconv.FormatFloat(hi, 'f', 1, 64) + " scale"
}

func (o *busObj) optBool(name string) {
	if v, ok := o.get(name, false); ok {
		if _, isBool := v.(bool); !isBool {
			o.fail(name, "type", "must be a boolean")
		}
	}
}

func (o *busObj) optTime(name string) {
	if s := o.optStr(name); s != "" {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			o.fail(name, "date-time", "%s is not an RFC 3339 time", busShort(s))
		}
	}
}

// object returns the member name as a child checker; a missing optional
// member gives nil, and methods on a nil-map child do nothing.
func (o *busObj) object(name string, required bool) *busObj {
	child := &busObj{path: o.path + "." + name, root: o.top()}
	v, ok := o.get(name, required)
	if !ok {
		if required {
			return child
		}
		return nil
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		o.fail(name, "type", "must be an object")
		return child
	}
	child.m = m
	return child
}

func (o *busObj) array(name string, required bool) []any {
	v, ok := o.get(name, required)
	if !ok {
		return nil
	}
	a, isArr := v.([]any)
	if !isArr {
		o.fail(name, "type", "must be an array")
	}
	return a
}

func (o *busObj) optStrs(name string) {
	for i, v := range o.array(name, false) {
		if _, isStr := v.(string); !isStr {
			o.fail(name+"["+strconv.Itoa(i)+"]", "type", "must be a string")
		}
	}
}

// each checks every element of the array name as an object.
func (o *busObj) each(name string, required bool, check func(*busObj)) {
	for i, v := range o.array(name, required) {
		item := name + "[" + strconv.Itoa(i) + "]"
		m, isObj := v.(map[string]any)
		if !isObj {
			o.fail(item, "type", "must be an object")
			return
		}
		check(&busObj{path: o.path + "." + item, m: m, root: o.top()})
	}
}
