package flows

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
	"github.com/herald-notify/herald/internal/templates"
)

// The bounds of a flow definition. Each is what one tenant's flow may cost the
// engine: steps and branch cases are interpreted per event, windows are timers
// and open workflows, items are kept per digest, a key is rendered per event.
const (
	// MaxSteps caps the steps of a flow, counting those inside branches (a
	// branch counts as a step, and so does each step of its cases and else).
	MaxSteps = 50
	// MaxCases caps the cases of one branch.
	MaxCases = 10
	// MinWindow and MaxWindow bound every duration of a flow: a digest's
	// window and max_wait, a delay, a wait's timeout, a throttle's window.
	MinWindow = time.Second
	MaxWindow = 30 * 24 * time.Hour
	// MaxDigestItems caps a digest's max_items (the count that closes it early).
	MaxDigestItems = 100_000
	// MaxKeptItems caps a digest's items: how many events' data the steps after
	// it see as {{.digest.items}}.
	MaxKeptItems = 100
	// MaxThrottleLimit caps a throttle's limit.
	MaxThrottleLimit = 100_000
	// MaxKeyBytes caps a digest's or throttle's key expression.
	MaxKeyBytes = 256
	// MaxIDBytes caps a step id.
	MaxIDBytes = 64
	// MaxFieldBytes caps a branch condition's field.
	MaxFieldBytes = 256
	// MaxConditionValues caps the values of an "in" condition, and
	// MaxConditionValueBytes each string value of a condition.
	MaxConditionValues     = 100
	MaxConditionValueBytes = 1024
)

// stepFields are the JSON fields each step type has, in the order the docs
// list them (Decode and Validate refuse any other).
var stepFields = map[StepType][]string{
	StepSend:     {"type", "id", "template_id", "channels"},
	StepDelay:    {"type", "id", "duration", "until"},
	StepDigest:   {"type", "id", "mode", "window", "max_wait", "schedule", "max_items", "key", "first", "items"},
	StepWait:     {"type", "id", "for", "step", "timeout"},
	StepThrottle: {"type", "id", "limit", "window", "key"},
	StepBranch:   {"type", "id", "cases", "else"},
}

// The condition operators of a branch case.
const (
	OpEq        = "eq"
	OpNe        = "ne"
	OpExists    = "exists"
	OpNotExists = "not_exists"
	OpIn        = "in"
	OpGt        = "gt"
	OpGte       = "gte"
	OpLt        = "lt"
	OpLte       = "lte"
)

// Ops lists the condition operators.
var Ops = []string{OpEq, OpNe, OpExists, OpNotExists, OpIn, OpGt, OpGte, OpLt, OpLte}

// UserFields are the user fields a condition may test as "user.<field>".
var UserFields = []string{"name", "email", "phone", "locale", "timezone"}

// Weekdays are the weekday names of a weekly schedule, as time.Weekday numbers them.
var Weekdays = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

var stepIDRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// Validate checks a decoded flow definition and returns the first problem found,
// in document order, as a *jsondecode.Error naming the field's path
// ("steps[3].window", "steps[1].cases[0].steps[0].template_id"); nil when the
// flow is valid. What it checks:
//
//   - a category (the templates' rule) and 1 to MaxSteps steps, counting
//     those inside branches, with at least one send step;
//   - each step has a known type and only the fields of that type; step ids
//     are unique in the flow;
//   - send: a well-formed template_id and one or more known channels, each once
//     (whether the template exists and has content for them is the API's check,
//     against the store);
//   - delay: a duration (MinWindow to MaxWindow) or until ("HH:MM"), not both;
//   - digest: only at the top level, at most one per flow; fixed and sliding
//     have a window (sliding also a max_wait ≥ window), scheduled a schedule;
//     every duration within MinWindow to MaxWindow (30 days); max_items up to
//     MaxDigestItems, items up to MaxKeptItems; first is send_now or absent;
//   - wait: for seen or read (default seen), a timeout, and step naming an
//     earlier send step with in_app among its channels;
//   - throttle: a limit (1 to MaxThrottleLimit) and a window;
//   - digest and throttle keys: see ParseKey;
//   - branch: 1 to MaxCases cases, each a condition on "data.<path>",
//     "user.<field>" (UserFields) or "steps.<id>.outcome", with an operator
//     (Ops) and a value of the kind it takes.
//
// "Earlier" means a step that has run whenever the referring one runs: one
// before it in its own step list, or before the branch it is in (at any depth),
// and after the flow's digest if the referring step is after it (the run after
// a digest is the digest's, not one event's). A step inside another branch's
// case may not have run, so it cannot be named.
//
// Cycles cannot be written: a branch holds its own nested step lists and the
// flow always goes on after the branch, so there is no step reference that
// jumps, and every run ends after at most MaxSteps steps (plus its waits).
func Validate(def Definition) error {
	if problem := templates.CategoryProblem(def.Category); problem != "" {
		code := "invalid_field"
		if strings.TrimSpace(def.Category) == "" {
			code = "missing_field"
		}
		return jsondecode.Field("category", code, "%s", problem)
	}
	if len(def.Steps) == 0 {
		return jsondecode.Field("steps", "missing_field", "steps is required: at least one step, such as {\"type\":\"send\",\"template_id\":\"...\",\"channels\":[\"in_app\"]}")
	}
	v := validator{ids: map[string]string{}}
	if err := v.list(def.Steps, "steps", map[string]Step{}, true); err != nil {
		return err
	}
	if v.count > MaxSteps {
		return jsondecode.Field("steps", "invalid_field", "a flow has at most %d steps, counting those inside branches; this one has %d", MaxSteps, v.count)
	}
	if v.sends == 0 {
		return jsondecode.Field("steps", "invalid_field", "a flow needs at least one send step: without one it never notifies anyone")
	}
	return nil
}

// validator walks a definition once, in document order.
type validator struct {
	// ids maps every step id seen so far to its path.
	ids    map[string]string
	count  int
	sends  int
	digest string // the path of the flow's digest step, "" until one is seen
}

// list checks a step list; earlier holds the steps, by id, that have run
// whenever the list's first step runs.
func (v *validator) list(steps []Step, path string, earlier map[string]Step, top bool) error {
	scope := make(map[string]Step, len(earlier)+len(steps))
	for id, s := range earlier {
		scope[id] = s
	}
	for i, s := range steps {
		at := path + "[" + itoa(i) + "]"
		v.count++
		if v.count > MaxSteps {
			return jsondecode.Field(at, "invalid_field", "a flow has at most %d steps, counting those inside branches", MaxSteps)
		}
		if err := v.step(s, at, scope, top); err != nil {
			return err
		}
		if s.Type == StepDigest {
			clear(scope) // the run after a digest is the digest's: no single event's steps before it
		}
		if s.ID != "" {
			scope[s.ID] = s
		}
	}
	return nil
}

func (v *validator) step(s Step, at string, scope map[string]Step, top bool) error {
	fields, ok := stepFields[s.Type]
	switch {
	case s.Type == "":
		return jsondecode.Field(at+".type", "missing_field", "%s.type is required: one of %s", at, stepTypeList())
	case !ok:
		return jsondecode.Field(at+".type", "invalid_field", "unknown step type %q; a step is one of %s", s.Type, stepTypeList())
	}
	for _, f := range setFields(s) {
		if !contains(fields, f) {
			return notOfType(at+"."+f, f, s.Type)
		}
	}
	if s.ID != "" {
		if err := v.stepID(s.ID, at+".id"); err != nil {
			return err
		}
	}
	switch s.Type {
	case StepSend:
		v.sends++
		return validSend(s, at)
	case StepDelay:
		return validDelay(s, at)
	case StepDigest:
		if !top {
			return jsondecode.Field(at+".type", "invalid_field", "a digest step may only be at the top level of a flow, not inside a branch")
		}
		if v.digest != "" {
			return jsondecode.Field(at+".type", "invalid_field", "a flow has at most one digest step; %s is one already", v.digest)
		}
		v.digest = at
		return validDigest(s, at)
	case StepWait:
		return validWait(s, at, scope, v.ids)
	case StepThrottle:
		return validThrottle(s, at)
	case StepBranch:
		return v.branch(s, at, scope)
	}
	return nil
}

func (v *validator) stepID(id, at string) error {
	switch {
	case len(id) > MaxIDBytes || !stepIDRE.MatchString(id):
		return jsondecode.Field(at, "invalid_field", "%s must be 1 to %d characters: a letter, then letters, digits, '_' or '-'", at, MaxIDBytes)
	case v.ids[id] != "":
		return jsondecode.Field(at, "invalid_field", "step id %q is already used by %s; step ids are unique in a flow", id, v.ids[id])
	}
	v.ids[id] = strings.TrimSuffix(at, ".id")
	return nil
}

func validSend(s Step, at string) error {
	switch {
	case s.TemplateID == "":
		return jsondecode.Field(at+".template_id", "missing_field", "%s.template_id is required", at)
	case !templates.ValidID(s.TemplateID):
		return jsondecode.Field(at+".template_id", "invalid_field", "%s.template_id must be %s", at, templates.IDRule)
	case len(s.Channels) == 0:
		return jsondecode.Field(at+".channels", "missing_field", "%s.channels is required: one or more of %v", at, herald.Channels)
	}
	for i, ch := range s.Channels {
		field := at + ".channels[" + itoa(i) + "]"
		if !herald.IsChannel(ch) {
			return jsondecode.Field(field, "invalid_field", "unknown channel %q; channels are %v", ch, herald.Channels)
		}
		if slices.Contains(s.Channels[:i], ch) {
			return jsondecode.Field(field, "invalid_field", "channel %q is listed twice", ch)
		}
	}
	return nil
}

func validDelay(s Step, at string) error {
	switch {
	case s.Duration != 0 && s.Until != "":
		return jsondecode.Field(at+".until", "invalid_field", "a delay has a duration or an until time, not both")
	case s.Until != "":
		if _, _, err := ParseTimeOfDay(s.Until); err != nil {
			return jsondecode.Field(at+".until", "invalid_field", "%s.until: %v", at, err)
		}
		return nil
	case s.Duration == 0:
		return jsondecode.Field(at+".duration", "missing_field", "a delay needs a duration (such as \"1h\") or an until time of day (such as \"09:00\")")
	}
	return inBounds(s.Duration, at+".duration")
}

func validDigest(s Step, at string) error {
	switch s.Mode {
	case "", DigestFixed, DigestSliding:
		if s.Schedule != nil {
			return jsondecode.Field(at+".schedule", "invalid_field", "schedule applies to a scheduled digest (\"mode\":\"scheduled\")")
		}
		if s.Window == 0 {
			return jsondecode.Field(at+".window", "missing_field", "%s.window is required: how long the digest collects events, such as \"5m\"", at)
		}
		if err := inBounds(s.Window, at+".window"); err != nil {
			return err
		}
		if s.Mode != DigestSliding {
			if s.MaxWait != 0 {
				return jsondecode.Field(at+".max_wait", "invalid_field", "max_wait applies to a sliding digest (\"mode\":\"sliding\"); a fixed digest closes window after its first event")
			}
			break
		}
		if s.MaxWait == 0 {
			return jsondecode.Field(at+".max_wait", "missing_field", "a sliding digest needs max_wait: the longest it stays open after its first event")
		}
		if err := inBounds(s.MaxWait, at+".max_wait"); err != nil {
			return err
		}
		if s.MaxWait < s.Window {
			return jsondecode.Field(at+".max_wait", "invalid_field", "max_wait (%s) must be at least window (%s)", s.MaxWait, s.Window)
		}
	case DigestScheduled:
		switch {
		case s.Window != 0:
			return jsondecode.Field(at+".window", "invalid_field", "a scheduled digest closes at its schedule; window applies to fixed and sliding digests")
		case s.MaxWait != 0:
			return jsondecode.Field(at+".max_wait", "invalid_field", "max_wait applies to a sliding digest")
		case s.Schedule == nil:
			return jsondecode.Field(at+".schedule", "missing_field", "a scheduled digest needs a schedule, such as {\"every\":\"day\",\"at\":\"09:00\"}")
		}
		if err := validSchedule(*s.Schedule, at+".schedule"); err != nil {
			return err
		}
	default:
		return jsondecode.Field(at+".mode", "invalid_field", "mode must be %s, %s or %s (default %s)", DigestFixed, DigestSliding, DigestScheduled, DigestFixed)
	}
	switch {
	case s.MaxItems < 0 || s.MaxItems > MaxDigestItems:
		return jsondecode.Field(at+".max_items", "invalid_field", "max_items must be from 1 to %d", MaxDigestItems)
	case s.Items < 0 || s.Items > MaxKeptItems:
		return jsondecode.Field(at+".items", "invalid_field", "items must be from 1 to %d (default %d)", MaxKeptItems, DefaultDigestItems)
	case s.First != "" && s.First != FirstSendNow:
		return jsondecode.Field(at+".first", "invalid_field", "first must be %q or left out", FirstSendNow)
	}
	return validKey(s.Key, at+".key")
}

func validSchedule(sc Schedule, at string) error {
	switch sc.Every {
	case "day":
		if sc.Weekday != "" {
			return jsondecode.Field(at+".weekday", "invalid_field", "weekday applies to a weekly schedule (\"every\":\"week\")")
		}
	case "week":
		if _, err := ParseWeekday(sc.Weekday); err != nil {
			return jsondecode.Field(at+".weekday", "invalid_field", "%v", err)
		}
	case "":
		return jsondecode.Field(at+".every", "missing_field", "%s.every is required: day or week", at)
	default:
		return jsondecode.Field(at+".every", "invalid_field", "every must be day or week")
	}
	if sc.At == "" {
		return jsondecode.Field(at+".at", "missing_field", "%s.at is required: a local time of day such as \"09:00\"", at)
	}
	if _, _, err := ParseTimeOfDay(sc.At); err != nil {
		return jsondecode.Field(at+".at", "invalid_field", "%s.at: %v", at, err)
	}
	return nil
}

func validWait(s Step, at string, scope map[string]Step, ids map[string]string) error {
	switch s.For {
	case "", WaitSeen, WaitRead:
	default:
		return jsondecode.Field(at+".for", "invalid_field", "for must be %s or %s (default %s)", WaitSeen, WaitRead, WaitSeen)
	}
	if s.Step == "" {
		return jsondecode.Field(at+".step", "missing_field", "%s.step is required: the id of an earlier send step with in_app among its channels", at)
	}
	target, err := earlierStep(s.Step, at+".step", scope, ids)
	if err != nil {
		return err
	}
	if target.Type != StepSend || !slices.Contains(target.Channels, herald.ChannelInApp) {
		return jsondecode.Field(at+".step", "invalid_field", "step %q is not a send step with in_app among its channels: a wait waits for an in-app item to be seen or read", s.Step)
	}
	if s.Timeout == 0 {
		return jsondecode.Field(at+".timeout", "missing_field", "%s.timeout is required: how long to wait, such as \"1h\"", at)
	}
	return inBounds(s.Timeout, at+".timeout")
}

func validThrottle(s Step, at string) error {
	switch {
	case s.Limit == 0:
		return jsondecode.Field(at+".limit", "missing_field", "%s.limit is required: how many runs per user (and key) per window", at)
	case s.Limit < 0 || s.Limit > MaxThrottleLimit:
		return jsondecode.Field(at+".limit", "invalid_field", "limit must be from 1 to %d", MaxThrottleLimit)
	case s.Window == 0:
		return jsondecode.Field(at+".window", "missing_field", "%s.window is required, such as \"1h\"", at)
	}
	if err := inBounds(s.Window, at+".window"); err != nil {
		return err
	}
	return validKey(s.Key, at+".key")
}

func (v *validator) branch(s Step, at string, scope map[string]Step) error {
	switch {
	case len(s.Cases) == 0:
		return jsondecode.Field(at+".cases", "missing_field", "a branch needs one or more cases: {\"if\":{...},\"steps\":[...]}")
	case len(s.Cases) > MaxCases:
		return jsondecode.Field(at+".cases", "invalid_field", "a branch has at most %d cases", MaxCases)
	}
	for i, c := range s.Cases {
		ca := at + ".cases[" + itoa(i) + "]"
		if err := validCondition(c.If, ca+".if", scope, v.ids); err != nil {
			return err
		}
		if err := v.list(c.Steps, ca+".steps", scope, false); err != nil {
			return err
		}
	}
	return v.list(s.Else, at+".else", scope, false)
}

func validCondition(c Condition, at string, scope map[string]Step, ids map[string]string) error {
	field := at + ".field"
	outcome := false
	switch {
	case c.Field == "":
		return jsondecode.Field(field, "missing_field", "%s is required: data.<path>, user.<field> or steps.<id>.outcome", field)
	case len(c.Field) > MaxFieldBytes || !printable(c.Field):
		return jsondecode.Field(field, "invalid_field", "%s must be at most %d bytes of printable text", field, MaxFieldBytes)
	case strings.HasPrefix(c.Field, "data."):
		for _, seg := range strings.Split(strings.TrimPrefix(c.Field, "data."), ".") {
			if seg == "" {
				return jsondecode.Field(field, "invalid_field", "%q is not a data path: data.<key>[.<key>...], such as data.order.total", c.Field)
			}
		}
	case strings.HasPrefix(c.Field, "user."):
		if !slices.Contains(UserFields, strings.TrimPrefix(c.Field, "user.")) {
			return jsondecode.Field(field, "invalid_field", "%q is not a user field; a condition can test user.%s", c.Field, strings.Join(UserFields, ", user."))
		}
	case strings.HasPrefix(c.Field, "steps."):
		id, ok := strings.CutSuffix(strings.TrimPrefix(c.Field, "steps."), ".outcome")
		if !ok || id == "" || strings.Contains(id, ".") {
			return jsondecode.Field(field, "invalid_field", "%q is not a step outcome: steps.<id>.outcome", c.Field)
		}
		if _, err := earlierStep(id, field, scope, ids); err != nil {
			return err
		}
		outcome = true
	default:
		return jsondecode.Field(field, "invalid_field", "%q is not a condition field: data.<path>, user.<field> or steps.<id>.outcome", c.Field)
	}
	value := at + ".value"
	switch c.Op {
	case "":
		return jsondecode.Field(at+".op", "missing_field", "%s.op is required: one of %s", at, strings.Join(Ops, ", "))
	case OpExists, OpNotExists:
		if c.Value != nil {
			return jsondecode.Field(value, "invalid_field", "%s takes no value", c.Op)
		}
	case OpEq, OpNe:
		if c.Value == nil {
			return jsondecode.Field(value, "missing_field", "%s needs a value", c.Op)
		}
		return validScalar(c.Value, value, outcome)
	case OpIn:
		list, ok := c.Value.([]any)
		switch {
		case !ok:
			return jsondecode.Field(value, "invalid_type", "in needs an array of values")
		case len(list) == 0 || len(list) > MaxConditionValues:
			return jsondecode.Field(value, "invalid_field", "in needs 1 to %d values", MaxConditionValues)
		}
		for i, x := range list {
			if err := validScalar(x, value+"["+itoa(i)+"]", outcome); err != nil {
				return err
			}
		}
	case OpGt, OpGte, OpLt, OpLte:
		if outcome {
			return jsondecode.Field(at+".op", "invalid_field", "a step outcome is compared with eq, ne or in")
		}
		if _, ok := number(c.Value); !ok {
			return jsondecode.Field(value, "invalid_type", "%s needs a number", c.Op)
		}
	default:
		return jsondecode.Field(at+".op", "invalid_field", "unknown operator %q; one of %s", c.Op, strings.Join(Ops, ", "))
	}
	return nil
}

// validScalar checks one value compared with eq, ne or in: a string, number or
// boolean (a step outcome: a string).
func validScalar(v any, at string, outcome bool) error {
	switch x := v.(type) {
	case string:
		if len(x) > MaxConditionValueBytes {
			return jsondecode.Field(at, "invalid_field", "a condition value is at most %d bytes", MaxConditionValueBytes)
		}
		return nil
	case bool:
		if !outcome {
			return nil
		}
	default:
		if _, ok := number(v); ok && !outcome {
			return nil
		}
	}
	if outcome {
		return jsondecode.Field(at, "invalid_type", "a step outcome is a string, such as \"sent\"")
	}
	return jsondecode.Field(at, "invalid_type", "a condition value is a string, a number or a boolean")
}

// number is v as a float64 when it is a finite number (json.Number as decoded,
// or a Go number in a definition built in code).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// earlierStep is the step id names, which must be one that has run whenever
// the referring step runs (see Validate).
func earlierStep(id, at string, scope map[string]Step, ids map[string]string) (Step, error) {
	if s, ok := scope[id]; ok {
		return s, nil
	}
	if where := ids[id]; where != "" {
		return Step{}, jsondecode.Field(at, "invalid_field",
			"step %q (%s) has not always run when this step runs: name a step before this one, before the branch it is in, and after the flow's digest", id, where)
	}
	return Step{}, jsondecode.Field(at, "invalid_field", "no step before this one has id %q", id)
}

func inBounds(d Duration, at string) error {
	if d.D() < MinWindow || d.D() > MaxWindow {
		return jsondecode.Field(at, "invalid_field", "%s must be from %s to %s, not %s", at, Duration(MinWindow), Duration(MaxWindow), d)
	}
	return nil
}

func validKey(key, at string) error {
	if key == "" {
		return nil
	}
	if err := ParseKey(key); err != nil {
		return jsondecode.Field(at, "invalid_field", "%s: %v", at, err)
	}
	return nil
}

// setFields are the JSON names of s's fields that hold a value.
func setFields(s Step) []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(s.TemplateID != "", "template_id")
	add(len(s.Channels) > 0, "channels")
	add(s.Duration != 0, "duration")
	add(s.Until != "", "until")
	add(s.Mode != "", "mode")
	add(s.Window != 0, "window")
	add(s.MaxWait != 0, "max_wait")
	add(s.Schedule != nil, "schedule")
	add(s.MaxItems != 0, "max_items")
	add(s.Key != "", "key")
	add(s.First != "", "first")
	add(s.Items != 0, "items")
	add(s.For != "", "for")
	add(s.Step != "", "step")
	add(s.Timeout != 0, "timeout")
	add(s.Limit != 0, "limit")
	add(len(s.Cases) > 0, "cases")
	add(len(s.Else) > 0, "else")
	return out
}

// ParseTimeOfDay reads a local time of day, "HH:MM" on a 24-hour clock.
func ParseTimeOfDay(s string) (hour, minute int, err error) {
	t, perr := time.Parse("15:04", s)
	if perr != nil || len(s) != 5 {
		return 0, 0, fmt.Errorf("%q is not a time of day; write HH:MM on a 24-hour clock, such as \"09:00\"", s)
	}
	return t.Hour(), t.Minute(), nil
}

// ParseWeekday reads a weekday name (Weekdays).
func ParseWeekday(s string) (time.Weekday, error) {
	if i := slices.Index(Weekdays, s); i >= 0 {
		return time.Weekday(i), nil
	}
	return 0, fmt.Errorf("weekday must be one of %s for a weekly schedule", strings.Join(Weekdays, ", "))
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func stepTypeList() string {
	names := make([]string, len(StepTypes))
	for i, t := range StepTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

func contains(list []string, v string) bool { return slices.Contains(list, v) }

func itoa(i int) string { return strconv.Itoa(i) }
