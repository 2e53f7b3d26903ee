package client

import (
	"context"
	"iter"
)

// The All... methods walk every page of a list operation, following next_cursor,
// as an iter.Seq2 of items and errors: a failed page yields (zero, err) once and
// ends the walk, as does breaking out of the loop. Params give the filters and
// the page size; their Cursor is where the walk starts (nil: the first page).
//
//	for c, err := range hc.AllCampaigns(ctx, nil) {
//		if err != nil { return err }
//		fmt.Println(c.CampaignID, c.Status)
//	}

// paginate walks pages fetched by fetch(cursor) until one has no next cursor.
func paginate[T any](ctx context.Context, start *string, fetch func(cursor *string) ([]T, *string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := start
		for {
			if err := ctx.Err(); err != nil {
				var zero T
				yield(zero, err)
				return
			}
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == nil || *next == "" {
				return
			}
			cursor = next
		}
	}
}

// withCursor copies params (nil: the zero value) so the walk can set its cursor
// without changing the caller's.
func withCursor[P any](params *P) P {
	if params == nil {
		var zero P
		return zero
	}
	return *params
}

// AllNotifications walks FindNotifications.
func (c *Client) AllNotifications(ctx context.Context, params *FindNotificationsParams) iter.Seq2[SupportNotification, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]SupportNotification, *string, error) {
		p.Cursor = cursor
		page, err := c.FindNotifications(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllDeadLetters walks ListDeadLetters.
func (c *Client) AllDeadLetters(ctx context.Context, params *ListDeadLettersParams) iter.Seq2[DeadLetter, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]DeadLetter, *string, error) {
		p.Cursor = cursor
		page, err := c.ListDeadLetters(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllUserNotifications walks ListUserNotifications.
func (c *Client) AllUserNotifications(ctx context.Context, userID string, params *ListUserNotificationsParams) iter.Seq2[SupportNotification, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]SupportNotification, *string, error) {
		p.Cursor = cursor
		page, err := c.ListUserNotifications(ctx, userID, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllAuditLog walks ListAuditLog.
func (c *Client) AllAuditLog(ctx context.Context, params *ListAuditLogParams) iter.Seq2[AuditEntry, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]AuditEntry, *string, error) {
		p.Cursor = cursor
		page, err := c.ListAuditLog(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllInbox walks ListInbox.
func (c *Client) AllInbox(ctx context.Context, userID string, params *ListInboxParams) iter.Seq2[InboxItem, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]InboxItem, *string, error) {
		p.Cursor = cursor
		page, err := c.ListInbox(ctx, userID, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllWebhookAttempts walks ListWebhookAttempts.
func (c *Client) AllWebhookAttempts(ctx context.Context, endpointID string, params *ListWebhookAttemptsParams) iter.Seq2[WebhookAttempt, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]WebhookAttempt, *string, error) {
		p.Cursor = cursor
		page, err := c.ListWebhookAttempts(ctx, endpointID, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllPushTokens walks ListPushTokens.
func (c *Client) AllPushTokens(ctx context.Context, userID string, params *ListPushTokensParams) iter.Seq2[PushToken, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]PushToken, *string, error) {
		p.Cursor = cursor
		page, err := c.ListPushTokens(ctx, userID, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllSuppressions walks ListSuppressions.
func (c *Client) AllSuppressions(ctx context.Context, params *ListSuppressionsParams) iter.Seq2[Suppression, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]Suppression, *string, error) {
		p.Cursor = cursor
		page, err := c.ListSuppressions(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllTemplates walks ListTemplates.
func (c *Client) AllTemplates(ctx context.Context, params *ListTemplatesParams) iter.Seq2[Template, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]Template, *string, error) {
		p.Cursor = cursor
		page, err := c.ListTemplates(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllFlows walks ListFlows.
func (c *Client) AllFlows(ctx context.Context, params *ListFlowsParams) iter.Seq2[Flow, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]Flow, *string, error) {
		p.Cursor = cursor
		page, err := c.ListFlows(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllCampaigns walks ListCampaigns.
func (c *Client) AllCampaigns(ctx context.Context, params *ListCampaignsParams) iter.Seq2[Campaign, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]Campaign, *string, error) {
		p.Cursor = cursor
		page, err := c.ListCampaigns(ctx, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}

// AllTopicSubscribers walks ListTopicSubscribers.
func (c *Client) AllTopicSubscribers(ctx context.Context, topic string, params *ListTopicSubscribersParams) iter.Seq2[TopicSubscriber, error] {
	p := withCursor(params)
	return paginate(ctx, p.Cursor, func(cursor *string) ([]TopicSubscriber, *string, error) {
		p.Cursor = cursor
		page, err := c.ListTopicSubscribers(ctx, topic, &p)
		if err != nil {
			return nil, nil, err
		}
		return page.Items, page.NextCursor, nil
	})
}
