package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/templates"
)

// Flow activities (workflows.FlowWorkflow and workflows.DigestWorkflow).
const (
	FlowRecord   = "FlowRecord"
	FlowStep     = "FlowStep"
	FlowTemplate = "FlowTemplate"
	FlowThrottle = "FlowThrottle"
	FlowWait     = "FlowWait"
	FlowWaitDone = "FlowWaitDone"
	DigestAdd    = "DigestAdd"
	DigestRemove = "DigestRemove"
	DigestOpen   = "DigestOpen"
	DigestClose  = "DigestClose"
)

// The digest workflow (workflows.DigestWorkflow), named here because the
// DigestAdd activity starts it with signal-with-start.
const (
	DigestWorkflow = "DigestWorkflow"
	// SignalDigestEvent carries one DigestEvent: an event row was written.
	SignalDigestEvent = "digest-event"
	// SignalDigestFlush closes the open window now.
	SignalDigestFlush = "digest-flush"
	// SignalInbox tells a flow run waiting on an inbox item that it changed (an InboxSignal).
	SignalInbox = "inbox"
)

// DigestWorkflowID is the digest of one tenant's flow for one user and key:
// every event of that user and key goes to this one workflow, which Temporal
// runs one task at a time. The user and key are hashed (they are tenant text).
func DigestWorkflowID(tenantID, flowID, userID, key string) string {
	sum := sha256.Sum256([]byte(userID + "\x00" + key))
	return "digest/" + tenantID + "/" + flowID + "/" + hex.EncodeToString(sum[:16])
}

// DigestInput starts a digest workflow (or, with State, continues it as new).
type DigestInput struct {
	TenantID    string
	UserID      string
	FlowID      string
	FlowVersion int
	// Flow is the version the digest runs with (the version of the event that
	// opened it); Path is the digest step's place in it.
	Flow  flows.Definition
	Path  []int
	Key   string
	State *DigestState `json:",omitempty"`
}

// DigestState is a digest's window, carried across continue-as-new.
type DigestState struct {
	// Open: a window is collecting; OpenedAt its start, LastAt its latest event.
	Open     bool
	OpenedAt time.Time
	LastAt   time.Time
	// Known is how many event signals this window received; MaxSeq the highest seq.
	Known  int
	MaxSeq int64
	// Closed counts this workflow's closed digests (all runs), for digest ids.
	Closed int
	// FirstSent: the window's first event went out at once (first: send_now).
	FirstSent bool
	// Flush: a flush arrived before the window could close.
	Flush bool
}

// DigestEvent is one event for a digest: its row's seq and time. A signal
// the API coalesced for concurrent events of the key carries the highest of
// their seqs and, in Count, how many they are (0 means 1: an event's own run
// signals one).
type DigestEvent struct {
	Seq   int64
	At    time.Time
	Count int `json:",omitempty"`
}

// InboxSignal tells a waiting flow run that an inbox item was seen or read.
type InboxSignal struct {
	NotificationID string
	Seen           bool
	Read           bool
}

// FlowRecordInput records a flow run: its notifications row (with the dedup
// ledger row when BodyHash is set) and its flow_runs row.
type FlowRecordInput struct {
	TenantID       string
	NotificationID string
	UserID         string
	FlowID         string
	FlowVersion    int
	Category       string
	// DigestID: this run is the continuation of that digest.
	DigestID     string
	WorkflowID   string
	RunID        string
	DedupKeyHash string
	AcceptedAt   time.Time
	BodyHash     []byte
	DedupUntil   time.Time
}

// FlowStepInput records one step's outcome (upsert by path).
type FlowStepInput struct {
	TenantID       string
	NotificationID string
	Path           string
	StepID         string
	Type           flows.StepType
	Outcome        herald.StepOutcome
	// Ref is the notification a send step started, or the digest key a digest
	// step joined.
	Ref        string
	StartedAt  time.Time
	FinishedAt time.Time
}

// FlowTemplateInput names the template a send step sends.
type FlowTemplateInput struct {
	TenantID   string
	TemplateID string
}

// FlowTemplateResult is the template's latest version, as a send step pins it
// when it runs.
type FlowTemplateResult struct {
	Version  int
	Category string
	Critical bool
	Channels []herald.Channel
}

// FlowThrottleInput claims one run of a throttle step's bucket.
type FlowThrottleInput struct {
	TenantID string
	FlowID   string
	UserID   string
	// KeyExpr is the step's key expression, rendered over Data.
	KeyExpr        string
	Data           templates.Data
	NotificationID string
	Path           string
	Limit          int
	Window         time.Duration
	// At is the run's time (the workflow's clock): the bucket is the window it falls in.
	At time.Time
}

// FlowWaitInput registers a run as waiting on an inbox item.
type FlowWaitInput struct {
	TenantID string
	UserID   string
	// NotificationID is the inbox item's (the earlier send step's notification).
	NotificationID string
	WorkflowID     string
	RunID          string
}

// FlowWaitResult is the item's state when the waiter was registered.
type FlowWaitResult struct {
	Seen bool
	Read bool
}

// DigestAddInput adds an event to its digest: its row, then a signal-with-start.
type DigestAddInput struct {
	Digest         DigestInput
	KeyExpr        string
	NotificationID string
	At             time.Time
	Data           templates.Data
	TaskQueue      string
}

// DigestAddResult says which digest the event was added to.
type DigestAddResult struct {
	Seq       int64
	Key       string
	DigestKey string
}

// DigestRemoveInput takes a cancelled event out of its digest.
type DigestRemoveInput struct {
	TenantID       string
	NotificationID string
}

// DigestRemoveResult: Removed when the event was still waiting; otherwise
// DigestID names the digest that already closed with it.
type DigestRemoveResult struct {
	Removed  bool
	DigestID string
}

// DigestOpenInput records an open window (GET /v1/users/{user_id}/digests).
type DigestOpenInput struct {
	TenantID  string
	DigestKey string
	FlowID    string
	UserID    string
	Key       string
	OpenedAt  time.Time
	// ClosesAt is the fixed or scheduled close (zero for sliding windows).
	ClosesAt time.Time
	Window   time.Duration
	MaxWait  time.Duration
}

// DigestCloseInput closes a window: it claims the digest key's unclaimed events
// up to MaxSeq (at most Limit), in seq order, for DigestID.
type DigestCloseInput struct {
	TenantID  string
	DigestKey string
	DigestID  string
	FlowID    string
	UserID    string
	Key       string
	MaxSeq    int64
	Limit     int
	// Items is how many events' data to return.
	Items    int
	ClosedAt time.Time
	// OnlySeq claims just this event (first: send_now); KeepOpen leaves the
	// window open then.
	OnlySeq  int64
	KeepOpen bool
}

// DigestCloseResult is what the claimed events add up to. A retried close
// (same DigestID) returns what the first one claimed.
type DigestCloseResult struct {
	Count   int
	FirstAt time.Time
	LastAt  time.Time
	Items   []templates.Data
	// Remaining counts the key's events still unclaimed (up to MaxSeq).
	Remaining int
}
