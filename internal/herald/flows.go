package herald

import "strconv"

// Flow statuses: the overall status of a flow event (its notifications row and
// the status API) when the run did not end with a send of its own.
const (
	// NotificationThrottled: a throttle step found its bucket full; the run ended there.
	NotificationThrottled NotificationStatus = "throttled"
	// NotificationDigested: the event joined a digest; the digest's own send (a
	// notification of its own) carries the delivery.
	NotificationDigested NotificationStatus = "digested"
)

// StepOutcome is how one step of a flow run ended (the flow_steps table, the
// status API and branch conditions on steps.<id>.outcome). A send step's
// outcome is its notification's overall status (NotificationStatus as a
// StepOutcome).
type StepOutcome string

// The step outcomes other than a send's.
const (
	// StepRunning: the step has started and not ended yet.
	StepRunning StepOutcome = "running"
	// StepElapsed: a delay ended.
	StepElapsed StepOutcome = "elapsed"
	// StepDigested: the event joined a digest (the steps after it run once per digest).
	StepDigested StepOutcome = "digested"
	// StepSeen and StepRead: a wait step's inbox item was seen or read in time;
	// the run ends there.
	StepSeen StepOutcome = "seen"
	StepRead StepOutcome = "read"
	// StepTimedOut: a wait step's timeout passed first; the run goes on.
	StepTimedOut StepOutcome = "timed_out"
	// StepAllowed and StepThrottled: a throttle step's bucket had room, or not.
	StepAllowed   StepOutcome = "allowed"
	StepThrottled StepOutcome = "throttled"
	// StepCase is a branch that took one of its cases ("case_0", "case_1", …, see
	// BranchOutcome); StepElse one that took its else.
	StepElse StepOutcome = "else"
	// StepCancelled: the event was cancelled while the step waited.
	StepCancelled StepOutcome = "cancelled"
)

// BranchOutcome is the outcome of a branch step that took case i.
func BranchOutcome(i int) StepOutcome {
	return StepOutcome("case_" + strconv.Itoa(i))
}

// Digest statuses (the digests table and GET /v1/users/{user_id}/digests).
const (
	// DigestOpen: the window is collecting events.
	DigestOpen = "open"
	// DigestSent: the window closed and its events were handed to the steps
	// after the digest (one run, one send per channel).
	DigestSent = "sent"
	// DigestEmpty: the window closed with no event left (all cancelled or
	// already claimed by an earlier close); nothing was sent.
	DigestEmpty = "empty"
)
