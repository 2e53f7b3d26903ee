package store_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
)

func TestFlowsAreVersionedAndDeletedSoftly(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	other, _ := mustTenant(t, st, ctx)
	v1, err := flows.Parse([]byte(`{"category":"comments","steps":[{"type":"digest","window":"5s"},{"type":"send","template_id":"t","channels":["in_app"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := flows.Parse([]byte(`{"category":"comments","steps":[{"type":"send","template_id":"t","channels":["in_app"]},
		{"type":"branch","cases":[{"if":{"field":"data.n","op":"gt","value":12345678901234567890},"steps":[]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r1, created, err := st.PutFlow(ctx, tn.ID, "comments", v1)
	if err != nil || r1.Version != 1 || !created {
		t.Fatalf("first save: %+v created=%v %v", r1, created, err)
	}
	r2, created, err := st.PutFlow(ctx, tn.ID, "comments", v2)
	if err != nil || r2.Version != 2 || created {
		t.Fatalf("second save: %+v created=%v %v", r2, created, err)
	}
	latest, err := st.GetFlow(ctx, tn.ID, "comments", 0)
	if err != nil || latest.Version != 2 || len(latest.Definition.Steps) != 2 || latest.Definition.Steps[1].Type != flows.StepBranch {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	// A condition's number comes back as written (json.Number), not as a float64.
	if v := latest.Definition.Steps[1].Cases[0].If.Value; v != json.Number("12345678901234567890") {
		t.Fatalf("condition value read back as %#v", v)
	}
	if old, err := st.GetFlow(ctx, tn.ID, "comments", 1); err != nil || old.Definition.Steps[0].Type != flows.StepDigest {
		t.Fatalf("v1 must stay as it was: %+v %v", old, err)
	}
	if _, err := st.GetFlow(ctx, other.ID, "comments", 0); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("another tenant reads the flow: %v", err)
	}
	if _, err := st.GetFlow(ctx, other.ID, "comments", 1); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("another tenant reads a version: %v", err)
	}
	if ok, err := st.DeleteFlow(ctx, other.ID, "comments"); err != nil || ok {
		t.Fatalf("another tenant deletes the flow: %v %v", ok, err)
	}
	if ok, err := st.DeleteFlow(ctx, tn.ID, "comments"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, _ := st.DeleteFlow(ctx, tn.ID, "comments"); ok {
		t.Fatal("a second delete found a live flow")
	}
	if _, err := st.GetFlow(ctx, tn.ID, "comments", 0); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("latest after delete: %v", err)
	}
	if _, err := st.GetFlow(ctx, tn.ID, "comments", 2); err != nil {
		t.Fatalf("runs keep their version after a delete: %v", err)
	}
	// Saving after a delete creates the flow again, with the next number.
	r3, created, err := st.PutFlow(ctx, tn.ID, "comments", v1)
	if err != nil || r3.Version != 3 || !created {
		t.Fatalf("save after delete: %+v created=%v %v", r3, created, err)
	}
}

func TestListFlowsPagesTheLatestLiveVersions(t *testing.T) {
	st, ctx := txStore(t)
	tn, _ := mustTenant(t, st, ctx)
	other, _ := mustTenant(t, st, ctx)
	def, err := flows.Parse([]byte(`{"category":"c","steps":[{"type":"send","template_id":"t","channels":["in_app"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c", "a", "b", "d"} {
		if _, _, err := st.PutFlow(ctx, tn.ID, id, def); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.PutFlow(ctx, tn.ID, "b", def); err != nil { // b is at version 2
		t.Fatal(err)
	}
	if _, _, err := st.PutFlow(ctx, other.ID, "aa", def); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteFlow(ctx, tn.ID, "d"); err != nil {
		t.Fatal(err)
	}
	page, more, err := st.ListFlows(ctx, tn.ID, "", 2)
	if err != nil || !more || len(page) != 2 || page[0].FlowID != "a" || page[1].FlowID != "b" || page[1].Version != 2 {
		t.Fatalf("first page: %+v more=%v %v", page, more, err)
	}
	page, more, err = st.ListFlows(ctx, tn.ID, "b", 2)
	if err != nil || more || len(page) != 1 || page[0].FlowID != "c" {
		t.Fatalf("second page: %+v more=%v %v", page, more, err)
	}
}
