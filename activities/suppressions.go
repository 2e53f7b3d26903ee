package activities

import (
	"context"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// batchSuppressions reads, in one query, which of a campaign batch's recipient
// addresses are on the tenant's suppression list (normalised addresses).
func (a *Activities) batchSuppressions(ctx context.Context, tenantID string, work []recipientWork) (map[string]bool, error) {
	var emails, phones []string
	for _, w := range work {
		if w.member.Email != "" {
			emails = append(emails, w.member.Email)
		}
		if w.member.Phone != "" {
			phones = append(phones, w.member.Phone)
		}
	}
	return a.Store.SuppressedAddresses(ctx, tenantID, emails, phones)
}

// suppressedChannels is preferences.EvalInput.Suppressed for one recipient of a
// batch whose listed addresses batchSuppressions read.
func suppressedChannels(listed map[string]bool, email, phone string) map[herald.Channel]bool {
	if len(listed) == 0 {
		return nil
	}
	var out map[herald.Channel]bool
	for _, addr := range []string{email, phone} {
		if addr == "" {
			continue
		}
		if ch, norm := store.NormalizeAddress(addr); listed[norm] {
			if out == nil {
				out = map[herald.Channel]bool{}
			}
			out[ch] = true
		}
	}
	return out
}
