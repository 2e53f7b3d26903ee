package flows

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
)

// Decode reads a flow definition from its JSON form, strictly: every object
// (the definition, each step, a schedule, a branch case and its condition) may
// only hold the fields its kind has, a step only those of its type (a window on
// a send step is refused), no field twice, each of its JSON type. Problems are
// a *jsondecode.Error whose Field is the path of the offending field,
// "steps[3].window" or "steps[1].cases[0].steps[0].template_id", so the API
// answers them as it answers any body field. Decode checks the shape only;
// Validate checks the values. Parse does both.
//
// Why not encoding/json with DisallowUnknownFields: it names an unknown field
// without its path, knows nothing of which fields belong to which step type,
// and takes a repeated field's last value silently.
func Decode(raw []byte) (Definition, error) {
	var def Definition
	var whole json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&whole); err != nil {
		return def, jsondecode.Explain(err)
	}
	if !jsondecode.OnlySpaceLeft(dec, raw) {
		return def, &jsondecode.Error{Code: "malformed_json", Message: "unexpected data after the JSON object"}
	}
	if !jsondecode.IsObject(whole) {
		return def, &jsondecode.Error{Code: "malformed_json", Message: "a flow definition must be a JSON object"}
	}
	d := decoder{}
	err := d.object(whole, "", func(key string, v json.RawMessage, path string) error {
		switch key {
		case "category":
			return d.value(v, path, &def.Category)
		case "steps":
			steps, err := d.steps(v, path)
			def.Steps = steps
			return err
		}
		return unknownField(path, "a flow has only category and steps")
	})
	return def, err
}

// Parse decodes and validates a flow definition: Decode, then Validate.
func Parse(raw []byte) (Definition, error) {
	def, err := Decode(raw)
	if err != nil {
		return def, err
	}
	return def, Validate(def)
}

// decoder counts the steps read so far, so a definition with thousands of
// nested steps is refused once it passes MaxSteps instead of being read whole.
type decoder struct {
	count int
}

// object calls field for each member of the JSON object raw at path, in
// document order; a member named twice is refused.
func (d *decoder) object(raw json.RawMessage, path string, field func(key string, v json.RawMessage, path string) error) error {
	ms, err := d.members(raw, path)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := field(m.key, m.raw, m.path); err != nil {
			return err
		}
	}
	return nil
}

// member is one member of a JSON object: its key, value and path.
type member struct {
	key, path string
	raw       json.RawMessage
}

// members reads the members of the JSON object raw at path, in document order,
// refusing a key named twice and one that is not a plain name.
func (d *decoder) members(raw json.RawMessage, path string) ([]member, error) {
	if !jsondecode.IsObject(raw) {
		return nil, jsondecode.Field(path, "invalid_type", "%s must be an object", path)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return nil, jsondecode.Field(path, "invalid_type", "%s must be an object", path)
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsondecode.Field(path, "malformed_json", "malformed JSON in %s", orFlow(path))
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, jsondecode.Field(path, "malformed_json", "malformed JSON in %s", orFlow(path))
		}
		at := join(path, key)
		if !plainName.MatchString(key) {
			// Not a name any object here has: refused naming the object it is in,
			// so a key such as "steps[0]" or "a.b" cannot pose as another path.
			return nil, jsondecode.Field(path, "unknown_field", "unknown field %q in %s", key, orFlow(path))
		}
		for _, m := range out {
			if m.key == key {
				return nil, jsondecode.Field(at, "invalid_field", "%s is given twice", at)
			}
		}
		out = append(out, member{key: key, path: at, raw: v})
	}
	return out, nil
}

// array calls elem for each element of the JSON array raw at path.
func (d *decoder) array(raw json.RawMessage, path string, elem func(i int, v json.RawMessage, path string) error) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil || elems == nil && !isNull(raw) {
		return jsondecode.Field(path, "invalid_type", "%s must be an array", path)
	}
	for i, v := range elems {
		if err := elem(i, v, path+"["+itoa(i)+"]"); err != nil {
			return err
		}
	}
	return nil
}

// steps reads a step list (the flow's, a case's or a branch's else).
func (d *decoder) steps(raw json.RawMessage, path string) ([]Step, error) {
	var steps []Step
	err := d.array(raw, path, func(_ int, v json.RawMessage, at string) error {
		d.count++
		if d.count > MaxSteps {
			return jsondecode.Field(at, "invalid_field", "a flow has at most %d steps, counting those inside branches", MaxSteps)
		}
		s, err := d.step(v, at)
		steps = append(steps, s)
		return err
	})
	return steps, err
}

// step reads one step: its type first (wherever it is in the object), then
// the fields that type has.
func (d *decoder) step(raw json.RawMessage, path string) (Step, error) {
	var s Step
	if !jsondecode.IsObject(raw) {
		return s, jsondecode.Field(path, "invalid_type", "%s must be an object such as {\"type\":\"send\",...}", path)
	}
	ms, err := d.members(raw, path)
	if err != nil {
		return s, err
	}
	var typeRaw json.RawMessage
	for _, m := range ms {
		if m.key == "type" {
			typeRaw = m.raw
		}
	}
	typePath := path + ".type"
	if typeRaw == nil || isNull(typeRaw) {
		return s, jsondecode.Field(typePath, "missing_field", "%s is required: one of %s", typePath, stepTypeList())
	}
	if err := d.value(typeRaw, typePath, &s.Type); err != nil {
		return s, err
	}
	fields, ok := stepFields[s.Type]
	if !ok {
		return s, jsondecode.Field(typePath, "invalid_field", "unknown step type %q; a step is one of %s", s.Type, stepTypeList())
	}
	field := func(key string, v json.RawMessage, at string) error {
		if key == "type" {
			return nil
		}
		if !contains(fields, key) {
			return notOfType(at, key, s.Type)
		}
		switch key {
		case "id":
			return d.value(v, at, &s.ID)
		case "template_id":
			return d.value(v, at, &s.TemplateID)
		case "channels":
			return d.value(v, at, &s.Channels)
		case "duration":
			return d.value(v, at, &s.Duration)
		case "until":
			return d.value(v, at, &s.Until)
		case "mode":
			return d.value(v, at, &s.Mode)
		case "window":
			return d.value(v, at, &s.Window)
		case "max_wait":
			return d.value(v, at, &s.MaxWait)
		case "schedule":
			if isNull(v) {
				return nil
			}
			s.Schedule = &Schedule{}
			return d.schedule(v, at, s.Schedule)
		case "max_items":
			return d.value(v, at, &s.MaxItems)
		case "key":
			return d.value(v, at, &s.Key)
		case "first":
			return d.value(v, at, &s.First)
		case "items":
			return d.value(v, at, &s.Items)
		case "for":
			return d.value(v, at, &s.For)
		case "step":
			return d.value(v, at, &s.Step)
		case "timeout":
			return d.value(v, at, &s.Timeout)
		case "limit":
			return d.value(v, at, &s.Limit)
		case "cases":
			return d.array(v, at, func(_ int, v json.RawMessage, at string) error {
				var c Case
				err := d.branchCase(v, at, &c)
				s.Cases = append(s.Cases, c)
				return err
			})
		case "else":
			steps, err := d.steps(v, at)
			s.Else = steps
			return err
		}
		return notOfType(at, key, s.Type) // unreachable while stepFields and this switch agree
	}
	for _, m := range ms {
		if err := field(m.key, m.raw, m.path); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (d *decoder) schedule(raw json.RawMessage, path string, sc *Schedule) error {
	return d.object(raw, path, func(key string, v json.RawMessage, at string) error {
		switch key {
		case "every":
			return d.value(v, at, &sc.Every)
		case "at":
			return d.value(v, at, &sc.At)
		case "weekday":
			return d.value(v, at, &sc.Weekday)
		}
		return unknownField(at, "a schedule has every, at and weekday")
	})
}

func (d *decoder) branchCase(raw json.RawMessage, path string, c *Case) error {
	return d.object(raw, path, func(key string, v json.RawMessage, at string) error {
		switch key {
		case "if":
			return d.object(v, at, func(key string, v json.RawMessage, at string) error {
				switch key {
				case "field":
					return d.value(v, at, &c.If.Field)
				case "op":
					return d.value(v, at, &c.If.Op)
				case "value":
					return d.value(v, at, &c.If.Value)
				}
				return unknownField(at, "a condition has field, op and value")
			})
		case "steps":
			steps, err := d.steps(v, at)
			c.Steps = steps
			return err
		}
		return unknownField(at, "a branch case has if and steps")
	})
}

// value decodes one field's JSON value into dst (numbers as json.Number),
// naming the field when it is of the wrong type or, for a duration, not one.
func (d *decoder) value(raw json.RawMessage, path string, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	err := dec.Decode(dst)
	if err == nil {
		return nil
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return jsondecode.Field(path, "invalid_type", "%s must be %s, not %s", path, wantType(dst), typ.Value)
	}
	if _, ok := dst.(*Duration); ok {
		if raw := bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '"' {
			return jsondecode.Field(path, "invalid_field", "%s: %v; a duration is a string such as \"30s\", \"1h30m\" or \"7d\"", path, err)
		}
		return jsondecode.Field(path, "invalid_field", "%s must be a duration string such as \"30s\", \"1h30m\" or \"7d\"", path)
	}
	return jsondecode.Field(path, "invalid_type", "%s must be %s", path, wantType(dst))
}

func wantType(dst any) string {
	switch dst.(type) {
	case *string, *StepType, *DigestMode, *WaitFor:
		return "a string"
	case *int:
		return "an integer"
	case *Duration:
		return "a duration string"
	case *[]herald.Channel:
		return "an array of strings"
	}
	return "a JSON value"
}

func unknownField(path, what string) error {
	return jsondecode.Field(path, "unknown_field", "unknown field %s: %s", path, what)
}

// notOfType refuses a field that another step type has, or that none has.
func notOfType(path, key string, t StepType) error {
	var owners []string
	for _, other := range StepTypes {
		if contains(stepFields[other], key) {
			owners = append(owners, string(other))
		}
	}
	if len(owners) == 0 {
		return jsondecode.Field(path, "unknown_field", "unknown field %s: a %s step has %s", path, t, strings.Join(stepFields[t], ", "))
	}
	return jsondecode.Field(path, "unknown_field", "%s does not apply to a %s step (it is a field of %s steps); a %s step has %s",
		path, t, strings.Join(owners, " and "), t, strings.Join(stepFields[t], ", "))
}

// plainName is the form of a field name that can be named in a path: every
// name a flow has, and the likely typos of one ("templateId").
var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func orFlow(path string) string {
	if path == "" {
		return "the flow"
	}
	return path
}
