package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	sdkworker "go.temporal.io/sdk/worker"
)

// lane is a fake SDK worker: Run fails with fatal after failAfter, or runs until
// interrupted.
type lane struct {
	sdkworker.Worker // only Run is called
	fatal            error
	failAfter        time.Duration
	interrupted      chan struct{}
}

func newLane(fatal error, after time.Duration) *lane {
	return &lane{fatal: fatal, failAfter: after, interrupted: make(chan struct{})}
}

func (l *lane) Run(stop <-chan any) error {
	if l.fatal != nil {
		time.Sleep(l.failAfter)
		return l.fatal
	}
	<-stop
	close(l.interrupted)
	return nil
}

func runAsync(ctx context.Context, ws []sdkworker.Worker) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Run(ctx, ws) }()
	return done
}

func TestRunStopsEveryLaneOnAFatalError(t *testing.T) {
	fatal := errors.New("namespace herald not found")
	ok1, bad, ok2 := newLane(nil, 0), newLane(fatal, 50*time.Millisecond), newLane(nil, 0)
	select {
	case err := <-runAsync(context.Background(), []sdkworker.Worker{ok1, bad, ok2}):
		if !errors.Is(err, fatal) {
			t.Fatalf("Run returned %v, want the lane's fatal error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run kept running after a lane failed: the process would hang with a dead lane")
	}
	for i, l := range []*lane{ok1, ok2} {
		select {
		case <-l.interrupted:
		default:
			t.Errorf("healthy lane %d was not stopped", i)
		}
	}
}

func TestRunStopsEveryLaneWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	lanes := []*lane{newLane(nil, 0), newLane(nil, 0), newLane(nil, 0)}
	done := runAsync(ctx, []sdkworker.Worker{lanes[0], lanes[1], lanes[2]})
	select {
	case err := <-done:
		t.Fatalf("Run returned %v before the context ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after a clean stop, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the context ended")
	}
	for i, l := range lanes {
		select {
		case <-l.interrupted:
		default:
			t.Errorf("lane %d was not stopped", i)
		}
	}
}
