package client

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// Flows: the definitions are PutFlow, GetFlow, ListFlows and DeleteFlow
// (operations.go); these send a flow's events and reach its digests.

type (
	// OpenDigests answers GET /v1/users/{id}/digests.
	OpenDigests = OpenDigestList
	// DigestFlushed answers POST /v1/users/{id}/digests/{flow_id}/flush.
	DigestFlushed = FlushDigest202JSONResponseBody
	// FlushDigestRequest is the body of POST /v1/users/{id}/digests/{flow_id}/flush.
	FlushDigestRequest = FlushDigestJSONBody
)

// CreateFlowEvent is POST /v1/notifications with a flow_id: an event of the
// tenant's flow. It is sent, retried and deduplicated as CreateNotification
// sends a notification (a generated idempotency key when req has none, reused
// on every retry); the answer is the event's notification id.
func (c *Client) CreateFlowEvent(ctx context.Context, req FlowEventRequest) (*NotificationSent, error) {
	if req.IdempotencyKey == nil {
		req.IdempotencyKey = Ptr(NewIdempotencyKey())
	}
	var raw struct {
		NotificationID     string             `json:"notification_id"`
		Status             NotificationStatus `json:"status"`
		Dedup              string             `json:"dedup"`
		OriginalAcceptedAt time.Time          `json:"original_accepted_at"`
	}
	status, err := c.do(ctx, idempotent(post("/v1/notifications", req)), &raw)
	if err != nil {
		return nil, err
	}
	return &NotificationSent{NotificationID: raw.NotificationID, Status: raw.Status,
		Duplicate: status == http.StatusOK || raw.Dedup == "duplicate", OriginalAcceptedAt: raw.OriginalAcceptedAt,
		IdempotencyKey: *req.IdempotencyKey}, nil
}

// ListUserDigests is GET /v1/users/{id}/digests: a page of the user's open
// digests (AllUserDigests walks them all).
func (c *Client) ListUserDigests(ctx context.Context, userID string, params *ListUserDigestsParams) (*OpenDigests, error) {
	return doJSON[OpenDigests](ctx, c, get(pathOf("v1", "users", userID, "digests"), queryOf(params)))
}

// AllUserDigests walks ListUserDigests.
func (c *Client) AllUserDigests(ctx context.Context, userID string, params *ListUserDigestsParams) iter.Seq2[OpenDigestList_Items, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]OpenDigestList_Items, *string, error) {
		p.Cursor = cursor
		page, err := c.ListUserDigests(ctx, userID, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// FlushDigest is POST /v1/users/{id}/digests/{flow_id}/flush: the open digest
// (of req.Key) closes now. It is not retried after a network error: a repeat
// that arrives after the digest closed could close the next one, opened by a
// later event.
func (c *Client) FlushDigest(ctx context.Context, userID, flowID string, req FlushDigestRequest) (*DigestFlushed, error) {
	return doJSON[DigestFlushed](ctx, c, post(pathOf("v1", "users", userID, "digests", flowID, "flush"), req))
}
