package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/preferences"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/internal/testenv"
)

func TestTemplatesAreVersionedAndDeletedSoftly(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	tpl := templates.Template{ID: "welcome", Category: "onboarding", InApp: &templates.InAppContent{Body: "v1"}}
	r1, err := st.PutTemplate(ctx, tn.ID, tpl)
	if err != nil || r1.Template.Version != 1 {
		t.Fatalf("first save: %+v %v", r1, err)
	}
	tpl.InApp.Body = "v2"
	if r2, err := st.PutTemplate(ctx, tn.ID, tpl); err != nil || r2.Template.Version != 2 {
		t.Fatalf("second save: %+v %v", r2, err)
	}
	latest, err := st.GetTemplate(ctx, tn.ID, "welcome", 0)
	if err != nil || latest.Template.Version != 2 || latest.Template.InApp.Body != "v2" {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	if old, err := st.GetTemplate(ctx, tn.ID, "welcome", 1); err != nil || old.Template.InApp.Body != "v1" {
		t.Fatalf("v1 must stay as it was: %+v %v", old, err)
	}
	if ok, err := st.DeleteTemplate(ctx, tn.ID, "welcome"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, err := st.GetTemplate(ctx, tn.ID, "welcome", 0); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("latest after delete: %v", err)
	}
	if _, err := st.GetTemplate(ctx, tn.ID, "welcome", 2); err != nil {
		t.Fatalf("accepted notifications still render with their version: %v", err)
	}
	if list, _, _ := st.ListTemplates(ctx, tn.ID, "", 10); len(list) != 0 {
		t.Fatalf("deleted template listed: %v", list)
	}
	if _, err := st.GetTemplate(ctx, "other", "welcome", 1); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
}

func TestPreferencesAndUnsubscribe(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	if _, _, err := st.UpsertUser(ctx, store.User{TenantID: tn.ID, UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	if p, err := st.GetPreferences(ctx, tn.ID, "u1"); err != nil || p.Channels != nil {
		t.Fatalf("no preferences yet: %+v %v", p, err)
	}
	if err := st.PutPreferences(ctx, tn.ID, "u1", preferences.Preferences{Channels: map[herald.Channel]bool{"email": false}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetCategoryEnabled(ctx, tn.ID, "u1", "marketing", false); err != nil {
		t.Fatal(err)
	}
	p, err := st.GetPreferences(ctx, tn.ID, "u1")
	if err != nil || p.Channels["email"] || p.Categories["marketing"].Enabled == nil || *p.Categories["marketing"].Enabled {
		t.Fatalf("after unsubscribe: %+v %v", p, err)
	}
	if err := st.SetCategoryEnabled(ctx, tn.ID, "ghost", "marketing", false); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	ts, err := st.GetTenantSettings(ctx, tn.ID)
	if err != nil || ts.DefaultLocale != "en" || len(ts.CategoryCaps) != 0 {
		t.Fatalf("default settings: %+v %v", ts, err)
	}
	ts.CategoryCaps = map[string]int{"marketing": 2}
	ts.DefaultLocale = "de"
	if err := st.PutTenantSettings(ctx, tn.ID, ts); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetTenantSettings(ctx, tn.ID); got.CategoryCaps["marketing"] != 2 || got.DefaultLocale != "de" {
		t.Fatalf("settings: %+v", got)
	}
}

// TestCapHoldsUnderConcurrency claims 50 notifications at once against a cap of 5:
// exactly 5 are allowed. It runs on the pool (real concurrent transactions).
func TestCapHoldsUnderConcurrency(t *testing.T) {
	pool := testenv.Pool(t)
	st := store.New(pool)
	ctx := context.Background()
	tn, _ := mustTenant(t, st, ctx)
	now := time.Now()
	claim := func(category, notificationID string, at time.Time) store.ClaimCapParams {
		return store.ClaimCapParams{TenantID: tn.ID, UserID: "u1", Category: category, NotificationID: notificationID, Limit: 5, At: at}
	}
	var allowed, denied int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := st.ClaimCap(ctx, claim("marketing", fmt.Sprintf("n%d", i), now))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
			} else if ok {
				allowed++
			} else {
				denied++
			}
		}()
	}
	wg.Wait()
	if allowed != 5 || denied != 45 {
		t.Fatalf("allowed %d denied %d, want 5 and 45", allowed, denied)
	}
	// A retried claim keeps its answer; the window rolls.
	var firstAllowed string
	for i := range 50 {
		if ok, _ := st.ClaimCap(ctx, claim("marketing", fmt.Sprintf("n%d", i), now)); ok {
			firstAllowed = fmt.Sprintf("n%d", i)
			break
		}
	}
	if firstAllowed == "" {
		t.Fatal("a retried allowed claim was denied")
	}
	if ok, _ := st.ClaimCap(ctx, claim("marketing", "later", now.Add(store.CapWindow+time.Minute))); !ok {
		t.Fatal("a claim after the window must be allowed")
	}
	if ok, _ := st.ClaimCap(ctx, claim("shipping", "other-category", now)); !ok {
		t.Fatal("caps are per category")
	}
}

// TestTenantSettingsUpdatesDoNotLoseEachOther runs concurrent updates of two
// different parts of the settings; both survive.
func TestTenantSettingsUpdatesDoNotLoseEachOther(t *testing.T) {
	st := store.New(testenv.Pool(t))
	ctx := context.Background()
	tn, _ := mustTenant(t, st, ctx)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := st.UpdateTenantSettings(ctx, tn.ID, func(ts *store.TenantSettings) {
				ts.CategoryCaps = map[string]int{"marketing": i + 1}
			}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := st.UpdateTenantSettings(ctx, tn.ID, func(ts *store.TenantSettings) {
				ts.PreferenceDefaults = preferences.Preferences{Channels: map[herald.Channel]bool{"sms": false}}
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ts, err := st.GetTenantSettings(ctx, tn.ID)
	if err != nil || ts.CategoryCaps["marketing"] == 0 || ts.PreferenceDefaults.Channels["sms"] != false || len(ts.PreferenceDefaults.Channels) != 1 {
		t.Fatalf("an update was lost: %+v %v", ts, err)
	}
}
