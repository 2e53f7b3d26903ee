package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/store"
)

// A batch of any size is announced with payloads that each fit a NOTIFY and
// together name exactly its users: no "wake everyone" fallback.
func TestInboxNotifyPayloadsNameExactlyTheUsers(t *testing.T) {
	for _, tc := range []struct {
		name          string
		tenants, n    int
		idLen         int
		wantPayloads  int
		wantAtLeastPs bool
	}{
		{"500 short ids of one tenant", 1, 500, 8, 1, false},
		{"500 ids of 255 bytes", 1, 500, 255, 16, true},
		{"3 tenants, 700 ids", 3, 700, 40, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tenants, users []string
			want := map[string]bool{}
			for i := range tc.n {
				tn := fmt.Sprintf("t_%d", i%tc.tenants)
				u := fmt.Sprintf("%0*d", tc.idLen, i)
				tenants, users = append(tenants, tn), append(users, u)
				want[store.NotifyKey(tn, u)] = true
			}
			ps := store.InboxNotifyPayloads(tenants, users)
			if tc.wantAtLeastPs && len(ps) < tc.wantPayloads || !tc.wantAtLeastPs && len(ps) != tc.wantPayloads {
				t.Fatalf("%d payloads, want %d", len(ps), tc.wantPayloads)
			}
			got := map[string]bool{}
			for _, p := range ps {
				if len(p) >= 8000 {
					t.Fatalf("a payload of %d bytes does not fit NOTIFY", len(p))
				}
				if strings.TrimSpace(p) == "*" {
					t.Fatal("a payload wakes everyone")
				}
				store.DecodeInboxNotify(p, func(tn, u string) { got[store.NotifyKey(tn, u)] = true })
			}
			if len(got) != len(want) {
				t.Fatalf("decoded %d users, want %d", len(got), len(want))
			}
			for k := range want {
				if !got[k] {
					t.Fatalf("%q not named", k)
				}
			}
		})
	}
}
