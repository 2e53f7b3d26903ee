package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/herald-notify/herald/activities"
	"github.com/herald-notify/herald/activities/contract"
)

// webhookQueue mocks an endpoint's queue: what ListPendingWebhooks reads and
// what DeliverWebhook / DeadLetterWebhook do to it.
type webhookQueue struct {
	mu      sync.Mutex
	pending []contract.PendingWebhook
	// refuse: messages the endpoint keeps refusing.
	refuse    map[int64]bool
	delivered []int64
	dead      []int64
	// inFlight counts sends running at once, per notification and overall.
	inFlight map[string]int
	maxPer   int
	maxAll   int
	running  int
}

func (q *webhookQueue) list(context.Context, contract.ListPendingWebhooksInput) ([]contract.PendingWebhook, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.pending), nil
}

func (q *webhookQueue) remove(id int64) {
	q.pending = slices.DeleteFunc(q.pending, func(p contract.PendingWebhook) bool { return p.ID == id })
}

func (q *webhookQueue) notificationOf(id int64) string {
	for _, p := range q.pending {
		if p.ID == id {
			return p.NotificationID
		}
	}
	return ""
}

func (q *webhookQueue) deliver(_ context.Context, in contract.WebhookMessageInput) error {
	q.mu.Lock()
	n := q.notificationOf(in.MessageID)
	q.inFlight[n]++
	q.running++
	q.maxPer, q.maxAll = max(q.maxPer, q.inFlight[n]), max(q.maxAll, q.running)
	q.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // let concurrent sends overlap
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inFlight[n]--
	q.running--
	if q.refuse[in.MessageID] {
		return errors.New("the endpoint answered HTTP 500")
	}
	q.delivered = append(q.delivered, in.MessageID)
	q.remove(in.MessageID)
	return nil
}

func (q *webhookQueue) deadLetter(_ context.Context, in contract.WebhookMessageInput) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = append(q.dead, in.MessageID)
	q.remove(in.MessageID)
	return nil
}

// TestWebhookEndpointWorkflowOrdersPerNotification: messages of one
// notification are sent one at a time in queue order; other notifications'
// go beside them (at most MaxParallelNotifications at once); a message the
// endpoint keeps refusing is retried until WebhookRetry.For, then
// dead-lettered, and holds back only its own notification's later messages;
// the workflow ends once idle.
func TestWebhookEndpointWorkflowOrdersPerNotification(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	// The refused message's retries log an error each: keep the output readable.
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Activities{})
	q := &webhookQueue{refuse: map[int64]bool{2: true}, inFlight: map[string]int{}}
	for i, n := range []string{"a", "b", "a", "c", "b", "d", "e", "f", "a", "b"} {
		q.pending = append(q.pending, contract.PendingWebhook{ID: int64(i + 1), NotificationID: n})
	}
	env.OnActivity(contract.ListPendingWebhooks, mock.Anything, mock.Anything).Return(q.list)
	env.OnActivity(contract.DeliverWebhook, mock.Anything, mock.Anything).Return(q.deliver)
	env.OnActivity(contract.DeadLetterWebhook, mock.Anything, mock.Anything).Return(q.deadLetter)

	env.ExecuteWorkflow(WebhookEndpointWorkflow, WebhookEndpointInput{TenantID: "t1", EndpointID: "we_1",
		Retry: WebhookRetry{Initial: time.Second, MaxInterval: 10 * time.Second, For: 2 * time.Minute}})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if !slices.Equal(q.dead, []int64{2}) {
		t.Errorf("dead-lettered %v, want [2]", q.dead)
	}
	// Per notification, in queue order: a = 1, 3, 9; b = (2 dead), 5, 10.
	order := func(ids ...int64) {
		t.Helper()
		var got []int64
		for _, d := range q.delivered {
			if slices.Contains(ids, d) {
				got = append(got, d)
			}
		}
		if !slices.Equal(got, ids) {
			t.Errorf("delivered %v in the order %v (all: %v)", ids, got, q.delivered)
		}
	}
	order(1, 3, 9)
	order(5, 10)
	if len(q.delivered) != 9 {
		t.Errorf("delivered %v, want every message but 2", q.delivered)
	}
	// b's later messages waited for 2's retries; a, c, d... did not: 1 went first.
	if q.delivered[0] == 5 || slices.Index(q.delivered, 5) < slices.Index(q.delivered, 4) {
		t.Errorf("b's messages were not held behind its refused message: %v", q.delivered)
	}
	if q.maxPer != 1 || q.maxAll > MaxParallelNotifications {
		t.Errorf("at most %d sends of one notification and %d overall at once; want 1 and ≤ %d", q.maxPer, q.maxAll, MaxParallelNotifications)
	}
}
