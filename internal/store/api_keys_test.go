package store_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// TestAPIKeyLifecycle: keys are listed without secrets, revoked keys stop
// resolving, the last active key is kept unless forced, and another tenant's key
// is not found.
func TestAPIKeyLifecycle(t *testing.T) {
	st, ctx := txStore(t)
	tn, first := mustTenant(t, st, ctx)
	other, _ := mustTenant(t, st, ctx)

	if _, err := st.TenantByAPIKey(ctx, first); err != nil {
		t.Fatal(err)
	}
	k, second, err := st.CreateNamedAPIKey(ctx, tn.ID, "ci")
	if err != nil || k.Name != "ci" || k.Prefix != second[:9] || k.RevokedAt != nil || k.LastUsedAt != nil || len(k.ID) != 20 {
		t.Fatalf("create: %+v %v", k, err)
	}
	keys, err := st.ListAPIKeys(ctx, tn.ID)
	if err != nil || len(keys) != 2 || keys[1].ID != k.ID {
		t.Fatalf("list: %+v %v", keys, err)
	}
	if keys[0].LastUsedAt == nil {
		t.Error("the key that authenticated has no last_used_at")
	}
	firstID := keys[0].ID

	if _, _, err := st.RevokeAPIKey(ctx, other.ID, firstID, false); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("another tenant revoked the key: %v", err)
	}
	revoked, hash, err := st.RevokeAPIKey(ctx, tn.ID, firstID, false)
	if err != nil || revoked.RevokedAt == nil || !bytes.Equal(hash, store.HashAPIKey(first)) {
		t.Fatalf("revoke: %+v %v", revoked, err)
	}
	if _, err := st.TenantByAPIKey(ctx, first); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a revoked key still resolves: %v", err)
	}
	again, _, err := st.RevokeAPIKey(ctx, tn.ID, firstID, false)
	if err != nil || !again.RevokedAt.Equal(*revoked.RevokedAt) {
		t.Fatalf("revoking again: %+v %v (want unchanged)", again, err)
	}
	if _, _, err := st.RevokeAPIKey(ctx, tn.ID, k.ID, false); !errors.Is(err, store.ErrLastActiveKey) {
		t.Fatalf("revoking the last active key: %v", err)
	}
	if _, err := st.TenantByAPIKey(ctx, second); err != nil {
		t.Fatalf("the refused revocation revoked it: %v", err)
	}
	if _, _, err := st.RevokeAPIKey(ctx, tn.ID, k.ID, true); err != nil {
		t.Fatalf("forced: %v", err)
	}
	if got, err := st.APIKeyOf(ctx, second); err != nil || got.RevokedAt == nil {
		t.Fatalf("APIKeyOf a revoked key: %+v %v", got, err)
	}
}
