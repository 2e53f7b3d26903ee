package herald

// Lane is a priority lane: critical (OTP, password reset), normal and bulk
// traffic run on separate task queues with their own worker slots, so a
// marketing blast never holds up a password reset (workflows.LaneTaskQueue
// names a lane's queue, worker.LaneOptions sizes its worker).
type Lane string

// The lanes.
const (
	LaneCritical Lane = "critical"
	LaneNormal   Lane = "normal"
	LaneBulk     Lane = "bulk"
)

// Lanes lists the lanes, most urgent first.
var Lanes = []Lane{LaneCritical, LaneNormal, LaneBulk}
