package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/herald-notify/herald/activities/contract"
	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// The flow activities: what workflows.FlowWorkflow and workflows.DigestWorkflow
// record and claim in PostgreSQL, and the signal-with-start that feeds a digest.

// FlowRecord writes a flow run's notification, dedup ledger and flow_runs rows.
func (a *Activities) FlowRecord(ctx context.Context, in contract.FlowRecordInput) error {
	return a.Store.RecordFlowRun(ctx, store.FlowRunRecord{
		TenantID: in.TenantID, NotificationID: in.NotificationID, UserID: in.UserID, FlowID: in.FlowID, FlowVersion: in.FlowVersion,
		Category: in.Category, DigestID: in.DigestID, WorkflowID: in.WorkflowID, RunID: in.RunID, DedupKeyHash: in.DedupKeyHash,
		AcceptedAt: in.AcceptedAt, BodyHash: in.BodyHash, DedupUntil: in.DedupUntil,
	})
}

// FlowStep records one step's outcome.
func (a *Activities) FlowStep(ctx context.Context, in contract.FlowStepInput) error {
	var finished *time.Time
	if !in.FinishedAt.IsZero() {
		finished = &in.FinishedAt
	}
	return a.Store.RecordFlowStep(ctx, in.TenantID, in.NotificationID, store.FlowStepRecord{
		Path: in.Path, StepID: in.StepID, Type: string(in.Type), Outcome: in.Outcome, NotificationID: in.Ref,
		StartedAt: in.StartedAt, FinishedAt: finished,
	})
}

// FlowTemplate reads the latest version of a send step's template. A template
// deleted since the flow was saved fails the step for good (RenderFailed).
func (a *Activities) FlowTemplate(ctx context.Context, in contract.FlowTemplateInput) (contract.FlowTemplateResult, error) {
	rec, err := a.Store.GetTemplate(ctx, in.TenantID, in.TemplateID, 0)
	if errors.Is(err, herald.ErrNotFound) {
		return contract.FlowTemplateResult{}, contract.RenderFailed.New("template "+in.TemplateID+" does not exist", err)
	}
	if err != nil {
		return contract.FlowTemplateResult{}, err
	}
	t := rec.Template
	return contract.FlowTemplateResult{Version: t.Version, Category: t.Category, Critical: t.Critical, Channels: t.Channels()}, nil
}

// FlowThrottle claims one run of the step's bucket: the flow, the user, the
// rendered key and the window the run's time falls in.
func (a *Activities) FlowThrottle(ctx context.Context, in contract.FlowThrottleInput) (bool, error) {
	window := in.Window
	if window <= 0 {
		window = time.Hour
	}
	start := in.At.UTC().Truncate(window)
	key, err := RenderFlowKey(in.KeyExpr, in.Data)
	if err != nil {
		return false, err
	}
	who := sha256.Sum256([]byte(in.FlowID + "\x00" + in.UserID + "\x00" + key))
	bucket := strings.Join([]string{hex.EncodeToString(who[:16]), strconv.FormatInt(start.UnixMilli(), 10),
		strconv.FormatInt(window.Milliseconds(), 10)}, "/")
	return a.Store.ClaimThrottle(ctx, in.TenantID, bucket, in.NotificationID, in.Path, in.Limit)
}

// FlowWait registers a waiting run and returns the item's state.
func (a *Activities) FlowWait(ctx context.Context, in contract.FlowWaitInput) (contract.FlowWaitResult, error) {
	seen, read, err := a.Store.AddFlowWaiter(ctx, store.FlowWaiter{TenantID: in.TenantID, UserID: in.UserID,
		NotificationID: in.NotificationID, WorkflowID: in.WorkflowID, RunID: in.RunID})
	if errors.Is(err, herald.ErrNotFound) {
		return contract.FlowWaitResult{}, nil // no inbox item (yet, or suppressed): only the timeout can end the wait
	}
	return contract.FlowWaitResult{Seen: seen, Read: read}, err
}

// FlowWaitDone unregisters a run that stopped waiting.
func (a *Activities) FlowWaitDone(ctx context.Context, in contract.FlowWaitInput) error {
	return a.Store.RemoveFlowWaiter(ctx, in.TenantID, in.NotificationID, in.WorkflowID)
}

// DigestAdd adds an event to its digest: the event's row first (its data stays
// in PostgreSQL), then a signal-with-start of the digest's workflow carrying
// only the row's seq. A retry writes no second row and signals again (the
// digest counts a repeated seq once more, which can only close a max_items
// window early; the claim decides membership, once).
func (a *Activities) DigestAdd(ctx context.Context, in contract.DigestAddInput) (contract.DigestAddResult, error) {
	d := in.Digest
	key, err := RenderFlowKey(in.KeyExpr, in.Data)
	if err != nil {
		return contract.DigestAddResult{}, err
	}
	d.Key = key
	out := contract.DigestAddResult{Key: d.Key, DigestKey: contract.DigestWorkflowID(d.TenantID, d.FlowID, d.UserID, d.Key)}
	seq, err := a.Store.AddDigestEvent(ctx, store.DigestEvent{TenantID: d.TenantID, DigestKey: out.DigestKey,
		NotificationID: in.NotificationID, At: in.At, Data: in.Data})
	if err != nil {
		return out, err
	}
	out.Seq = seq
	if a.Digests == nil {
		return out, errors.New("this worker has no Temporal client for digests")
	}
	return out, a.Digests.SignalDigest(ctx, out.DigestKey, in.TaskQueue, d, contract.DigestEvent{Seq: seq, At: in.At})
}

// DigestRemove takes a cancelled event out of its digest if it has not closed.
func (a *Activities) DigestRemove(ctx context.Context, in contract.DigestRemoveInput) (contract.DigestRemoveResult, error) {
	removed, digestID, err := a.Store.RemoveDigestEvent(ctx, in.TenantID, in.NotificationID)
	if errors.Is(err, herald.ErrNotFound) {
		return contract.DigestRemoveResult{Removed: true}, nil // never added: nothing to take out
	}
	return contract.DigestRemoveResult{Removed: removed, DigestID: digestID}, err
}

// DigestOpen records a digest's open window.
func (a *Activities) DigestOpen(ctx context.Context, in contract.DigestOpenInput) error {
	return a.Store.OpenDigestWindow(ctx, store.DigestWindow{TenantID: in.TenantID, DigestKey: in.DigestKey, FlowID: in.FlowID,
		UserID: in.UserID, Key: in.Key, OpenedAt: in.OpenedAt, ClosesAt: in.ClosesAt, Window: in.Window, MaxWait: in.MaxWait})
}

// DigestClose claims a window's events for a digest id.
func (a *Activities) DigestClose(ctx context.Context, in contract.DigestCloseInput) (contract.DigestCloseResult, error) {
	res, err := a.Store.CloseDigest(ctx, store.CloseDigestParams{TenantID: in.TenantID, DigestKey: in.DigestKey, DigestID: in.DigestID,
		FlowID: in.FlowID, UserID: in.UserID, Key: in.Key, MaxSeq: in.MaxSeq, Limit: in.Limit, OnlySeq: in.OnlySeq, Items: in.Items,
		ClosedAt: in.ClosedAt, KeepOpen: in.KeepOpen})
	if err != nil {
		return contract.DigestCloseResult{}, err
	}
	out := contract.DigestCloseResult{Count: res.Count, FirstAt: res.FirstAt, LastAt: res.LastAt, Remaining: res.Remaining,
		Items: make([]templates.Data, 0, len(res.Items))}
	size := 0
	for _, it := range res.Items {
		// The items travel in the continuation's input: keep them well inside
		// what Temporal carries (contract.MaxWorkflowInputBytes).
		if size += contract.PayloadSize(it); size > maxDigestItemsBytes {
			break
		}
		out.Items = append(out.Items, it)
	}
	return out, nil
}

// maxDigestItemsBytes bounds the events' data a digest hands to the steps after
// it ({{.digest.items}}): the first items that fit, half of the workflow
// input bound.
const maxDigestItemsBytes = contract.MaxWorkflowInputBytes / 2

// RenderFlowKey renders a digest or throttle key expression ("{{.thread_id}}")
// over the event data by the one rule the API checks it with at acceptance
// (flows.RenderKey: a string as it is, a number as written, an object as its
// canonical JSON, null or absent as ""), so the key the API accepted is the
// key the engine uses. A key that cannot be rendered (only a definition the
// API never validated can have one) fails for good (RenderFailed) rather than
// falling into another key's digest or bucket.
func RenderFlowKey(expr string, data map[string]any) (string, error) {
	key, err := flows.RenderKey(expr, data)
	if err != nil {
		return "", contract.RenderFailed.New("the flow key "+expr+" cannot be rendered: "+err.Error(), err)
	}
	return key, nil
}
