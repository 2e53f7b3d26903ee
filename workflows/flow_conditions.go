package workflows

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
)

// EvalCondition evaluates a branch condition: Field is data.<path> (the event
// data; dots walk nested objects), user.<field> (user_id, name, email, phone,
// locale, timezone) or steps.<id>.outcome (an earlier step's outcome). A field
// that is absent only satisfies not_exists (and ne). Numbers compare as
// numbers, strings and booleans as text (an object or a list equals nothing);
// in takes a list.
func EvalCondition(c flows.Condition, data map[string]any, user *contract.Recipient, outcomes map[string]herald.StepOutcome) bool {
	v, ok := conditionField(c.Field, data, user, outcomes)
	switch c.Op {
	case "exists":
		return ok
	case "not_exists":
		return !ok
	case "ne":
		return !ok || !equalValues(v, c.Value)
	}
	if !ok {
		return false
	}
	switch c.Op {
	case "eq":
		return equalValues(v, c.Value)
	case "in":
		list, _ := c.Value.([]any)
		for _, e := range list {
			if equalValues(v, e) {
				return true
			}
		}
		return false
	case "gt", "gte", "lt", "lte":
		a, aok := number(v)
		b, bok := number(c.Value)
		if !aok || !bok {
			return false
		}
		switch c.Op {
		case "gt":
			return a > b
		case "gte":
			return a >= b
		case "lt":
			return a < b
		}
		return a <= b
	}
	return false
}

func conditionField(field string, data map[string]any, user *contract.Recipient, outcomes map[string]herald.StepOutcome) (any, bool) {
	switch {
	case strings.HasPrefix(field, "data."):
		var cur any = data
		for _, part := range strings.Split(strings.TrimPrefix(field, "data."), ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[part]; !ok {
				return nil, false
			}
		}
		return cur, true
	case strings.HasPrefix(field, "user."):
		if user == nil {
			return nil, false
		}
		v := map[string]string{"user_id": user.UserID, "name": user.Name, "email": user.Email, "phone": user.Phone,
			"locale": user.Locale, "timezone": user.Timezone}[strings.TrimPrefix(field, "user.")]
		return v, v != ""
	case strings.HasPrefix(field, "steps.") && strings.HasSuffix(field, ".outcome"):
		o, ok := outcomes[strings.TrimSuffix(strings.TrimPrefix(field, "steps."), ".outcome")]
		return string(o), ok
	}
	return nil, false
}

func equalValues(a, b any) bool {
	if x, ok := number(a); ok {
		if y, ok := number(b); ok {
			return x == y
		}
	}
	return text(a) == text(b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case string:
		return 0, false
	}
	return 0, false
}

// text is a scalar's text; objects and lists compare equal to nothing.
func text(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(s)
	case json.Number:
		return s.String()
	}
	return "\x00not-a-scalar"
}
