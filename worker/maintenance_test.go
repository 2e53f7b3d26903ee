package worker

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// The maintenance Schedule is created once and brought up to date after:
// a second call (another worker process, or `herald migrate`) changes its
// interval and keeps one Schedule, one run at a time (overlap skip).
func TestEnsureMaintenanceScheduleIsIdempotent(t *testing.T) {
	tc := testenv.TemporalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tq := testenv.UniqueName(t, "tq")
	id := testenv.UniqueName(t, workflows.MaintenanceScheduleID)
	h := tc.ScheduleClient().GetHandle(ctx, id)
	created, err := ensureMaintenanceSchedule(ctx, tc, id, tq, time.Hour)
	if err != nil || !created {
		t.Fatalf("first call: created %v, %v", created, err)
	}
	t.Cleanup(func() { _ = h.Delete(context.Background()) })
	created, err = ensureMaintenanceSchedule(ctx, tc, id, tq, 2*time.Hour)
	if err != nil || created {
		t.Fatalf("second call: created %v, %v", created, err)
	}
	d, err := h.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Schedule.Spec.Intervals; len(got) != 1 || got[0].Every != 2*time.Hour {
		t.Fatalf("intervals %+v, want every 2h", got)
	}
	if d.Schedule.Policy.Overlap != enumspb.SCHEDULE_OVERLAP_POLICY_SKIP {
		t.Fatalf("overlap %v, want skip", d.Schedule.Policy.Overlap)
	}
}

// herald migrate sets the namespace's retention to the notification
// history's, at least a day; a second call changes nothing.
func TestSetNamespaceRetention(t *testing.T) {
	tc := testenv.TemporalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, after, err := SetNamespaceRetention(ctx, tc, "default", 30*24*time.Hour)
	if err != nil || after != 30*24*time.Hour {
		t.Fatalf("set 720h: %s, %v", after, err)
	}
	before, after, err := SetNamespaceRetention(ctx, tc, "default", 30*24*time.Hour)
	if err != nil || before != after {
		t.Fatalf("again: %s → %s, %v", before, after, err)
	}
	if _, after, err := SetNamespaceRetention(ctx, tc, "default", time.Minute); err != nil || after != 24*time.Hour {
		t.Fatalf("a minute is raised to a day: %s, %v", after, err)
	}
}
