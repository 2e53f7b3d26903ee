// Package flows is the tenant-facing flow definition: a category and an ordered
// list of steps (send, delay, digest, wait, throttle, branch) that one
// deterministic interpreter workflow (workflows.FlowWorkflow) runs per event.
// The API decodes and validates a Definition on PUT /v1/flows/{flow_id}; the
// store keeps every version; a run carries the version it started with.
//
// The wire form is one JSON object per step, told apart by "type", e.g.
//
//	{"category":"comments","steps":[{"type":"digest","window":"5s"},
//	 {"type":"send","template_id":"comment_digest","channels":["in_app"]}]}
package flows

import (
	"github.com/herald-notify/herald/internal/herald"
)

// StepType names a kind of step.
type StepType string

// The step kinds.
const (
	StepSend     StepType = "send"
	StepDelay    StepType = "delay"
	StepDigest   StepType = "digest"
	StepWait     StepType = "wait"
	StepThrottle StepType = "throttle"
	StepBranch   StepType = "branch"
)

// StepTypes lists every step kind.
var StepTypes = []StepType{StepSend, StepDelay, StepDigest, StepWait, StepThrottle, StepBranch}

// DigestMode is how a digest's window closes.
type DigestMode string

// The digest modes.
const (
	// DigestFixed closes Window after the digest's first event (the default).
	DigestFixed DigestMode = "fixed"
	// DigestSliding closes Window after the latest event (inactivity), and at
	// most MaxWait after the first.
	DigestSliding DigestMode = "sliding"
	// DigestScheduled closes at Schedule's next local time in the user's zone.
	DigestScheduled DigestMode = "scheduled"
)

// FirstSendNow, as Step.First of a digest, sends a digest's first event at once
// (as a digest of one) and digests the rest.
const FirstSendNow = "send_now"

// WaitFor is what a wait step waits for on an earlier send step's inbox item.
type WaitFor string

// The inbox states a wait step can wait for.
const (
	WaitSeen WaitFor = "seen"
	WaitRead WaitFor = "read"
)

// Definition is one version of a flow.
type Definition struct {
	Category string `json:"category"`
	Steps    []Step `json:"steps"`
}

// Step is one step; which fields apply depends on Type (the rest stay empty and
// validation refuses them naming the field, e.g. steps[2].window).
type Step struct {
	Type StepType `json:"type"`
	// ID names the step so that a later wait step or branch condition can refer
	// to it; optional, unique within the flow.
	ID string `json:"id,omitempty"`

	// send
	TemplateID string           `json:"template_id,omitempty"`
	Channels   []herald.Channel `json:"channels,omitempty"`

	// delay: Duration, or Until a local time of day ("09:00") in the user's
	// time zone (the next such instant).
	Duration Duration `json:"duration,omitempty"`
	Until    string   `json:"until,omitempty"`

	// digest (Window and Key are shared with throttle)
	Mode     DigestMode `json:"mode,omitempty"`
	Window   Duration   `json:"window,omitempty"`
	MaxWait  Duration   `json:"max_wait,omitempty"`
	Schedule *Schedule  `json:"schedule,omitempty"`
	MaxItems int        `json:"max_items,omitempty"`
	// Key is a template expression over the event data ("{{.thread_id}}"):
	// events with different keys go to different digests (or throttle buckets).
	Key string `json:"key,omitempty"`
	// First is FirstSendNow or empty.
	First string `json:"first,omitempty"`
	// Items is how many events' data the steps after a digest see as
	// {{.digest.items}} (default DefaultDigestItems).
	Items int `json:"items,omitempty"`

	// wait: until the inbox item of the send step named Step is For (seen or
	// read), or Timeout; the steps after it run only on timeout.
	For     WaitFor  `json:"for,omitempty"`
	Step    string   `json:"step,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`

	// throttle: at most Limit runs per user (and Key) per Window; the rest end
	// throttled.
	Limit int `json:"limit,omitempty"`

	// branch: the first case whose condition holds runs its steps, else Else;
	// then the flow goes on after the branch.
	Cases []Case `json:"cases,omitempty"`
	Else  []Step `json:"else,omitempty"`
}

// Schedule is a scheduled digest's closing time: every day (or every week on
// Weekday) at At ("09:00") in the user's time zone.
type Schedule struct {
	Every   string `json:"every"` // "day" or "week"
	At      string `json:"at"`
	Weekday string `json:"weekday,omitempty"` // "monday" ... for "week"
}

// Case is one arm of a branch.
type Case struct {
	If    Condition `json:"if"`
	Steps []Step    `json:"steps"`
}

// Condition compares one field with a value. Field is "data.<path>" (event
// data), "user.<field>" (locale, timezone, email, phone, or a profile field)
// or "steps.<id>.outcome" (an earlier step's outcome).
type Condition struct {
	Field string `json:"field"`
	Op    string `json:"op"` // eq, ne, exists, not_exists, in, gt, gte, lt, lte
	Value any    `json:"value,omitempty"`
}

// DefaultDigestItems is how many events' data a digest keeps for its template
// when the step does not say.
const DefaultDigestItems = 10

// WithDefaults is d with the defaults of what its steps leave out written in:
// a digest's mode (fixed) and items (DefaultDigestItems), a wait's for (seen).
// The stored definition keeps what the tenant wrote; the engine runs this.
func (d Definition) WithDefaults() Definition {
	d.Steps = stepsWithDefaults(d.Steps)
	return d
}

func stepsWithDefaults(steps []Step) []Step {
	if steps == nil {
		return nil
	}
	out := make([]Step, len(steps))
	for i, s := range steps {
		switch s.Type {
		case StepDigest:
			if s.Mode == "" {
				s.Mode = DigestFixed
			}
			if s.Items == 0 {
				s.Items = DefaultDigestItems
			}
		case StepWait:
			if s.For == "" {
				s.For = WaitSeen
			}
		case StepBranch:
			cases := make([]Case, len(s.Cases))
			for j, c := range s.Cases {
				c.Steps = stepsWithDefaults(c.Steps)
				cases[j] = c
			}
			s.Cases = cases
			s.Else = stepsWithDefaults(s.Else)
		}
		out[i] = s
	}
	return out
}
