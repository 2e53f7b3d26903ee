package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/herald-notify/herald/client"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/templates"
)

// commentsFlow is the definition the product requires to be accepted exactly as
// written, byte for byte.
const commentsFlow = `{"category":"comments","steps":[{"type":"digest","window":"5s"},
{"type":"send","template_id":"comment_digest","channels":["in_app"]}]}`

// commentDigestTemplate renders the digest's count.
func commentDigestTemplate() templates.Template {
	return templates.Template{ID: "comment_digest", Category: "comments",
		InApp: &templates.InAppContent{Title: "New comments", Body: "{{.digest.count}} new comments"}}
}

func TestFlowCRUDAndVersions(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("flows")
	_, otherKey := h.Tenant("flows-other")
	h.Template(key, commentDigestTemplate())
	h.Template(key, apitest.SimpleTemplate("alert"))

	r := h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/comments", key, commentsFlow)
	if r.Str("flow_id") != "comments" || r.JSON["version"] != 1.0 || r.Str("category") != "comments" || r.Str("created_at") == "" {
		t.Fatalf("first version: %s", r.Body)
	}
	// Shown as written: no defaults added (no "mode", no "items").
	if got := fmt.Sprint(r.JSON["steps"]); got != "[map[type:digest window:5s] map[channels:[in_app] template_id:comment_digest type:send]]" {
		t.Fatalf("steps shown as %s", got)
	}
	v2 := `{"category":"comments","steps":[{"type":"send","id":"now","template_id":"alert","channels":["in_app","email"]},
		{"type":"wait","step":"now","for":"read","timeout":"1h"},{"type":"send","template_id":"alert","channels":["email"]}]}`
	r = h.MustDo(http.StatusOK, http.MethodPut, "/v1/flows/comments", key, v2)
	if r.JSON["version"] != 2.0 {
		t.Fatalf("second version: %s", r.Body)
	}
	latest := h.MustDo(http.StatusOK, http.MethodGet, "/v1/flows/comments", key, nil)
	if latest.JSON["version"] != 2.0 || len(latest.JSON["steps"].([]any)) != 3 {
		t.Fatalf("latest: %s", latest.Body)
	}
	v1 := h.MustDo(http.StatusOK, http.MethodGet, "/v1/flows/comments?version=1", key, nil)
	if v1.JSON["version"] != 1.0 || len(v1.JSON["steps"].([]any)) != 2 {
		t.Fatalf("version 1: %s", v1.Body)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/comments?version=3", key, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/comments?version=0", key, nil), http.StatusBadRequest, "invalid_field", "version")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/bad%20id", key, nil), http.StatusBadRequest, "invalid_field", "flow_id")

	// Another tenant sees nothing of it, by any route.
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/comments", otherKey, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/comments?version=1", otherKey, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodDelete, "/v1/flows/comments", otherKey, nil), http.StatusNotFound, "not_found", "")
	if list := h.MustDo(http.StatusOK, http.MethodGet, "/v1/flows", otherKey, nil); len(list.JSON["items"].([]any)) != 0 {
		t.Fatalf("another tenant lists the flow: %s", list.Body)
	}
	// ... and its own flow of the same id names its own templates: this tenant's
	// comment_digest does not exist for it.
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/flows/comments", otherKey, commentsFlow), http.StatusBadRequest, "unknown_template", "steps[1].template_id")

	// Delete: the latest is gone, a version stays readable, a new save is version 3.
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/flows/comments", key, nil)
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/comments", key, nil), http.StatusNotFound, "not_found", "")
	apitest.WantError(t, h.Do(http.MethodDelete, "/v1/flows/comments", key, nil), http.StatusNotFound, "not_found", "")
	h.MustDo(http.StatusOK, http.MethodGet, "/v1/flows/comments?version=2", key, nil)
	if r := h.MustDo(http.StatusCreated, http.MethodPut, "/v1/flows/comments", key, commentsFlow); r.JSON["version"] != 3.0 {
		t.Fatalf("save after delete: %s", r.Body)
	}

	// Every change is in the audit log.
	log := h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=flow.put", key, nil)
	if n := len(log.JSON["items"].([]any)); n != 3 {
		t.Fatalf("flow.put entries: %d: %s", n, log.Body)
	}
	log = h.MustDo(http.StatusOK, http.MethodGet, "/v1/audit-log?action=flow.delete", key, nil)
	if items := log.JSON["items"].([]any); len(items) != 1 || !strings.Contains(fmt.Sprint(items[0]), "flow_id=comments") {
		t.Fatalf("flow.delete entries: %s", log.Body)
	}
}

func TestFlowListPages(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("flow-pages")
	h.Template(key, apitest.SimpleTemplate("alert"))
	def := `{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"]}]}`
	for i := 5; i >= 1; i-- {
		h.MustDo(http.StatusCreated, http.MethodPut, fmt.Sprintf("/v1/flows/f%d", i), key, def)
	}
	h.MustDo(http.StatusOK, http.MethodPut, "/v1/flows/f2", key, def)
	h.MustDo(http.StatusNoContent, http.MethodDelete, "/v1/flows/f4", key, nil)

	var ids []string
	path := "/v1/flows?limit=2"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than flows")
		}
		r := h.MustDo(http.StatusOK, http.MethodGet, path, key, nil)
		for _, it := range r.JSON["items"].([]any) {
			m := it.(map[string]any)
			ids = append(ids, fmt.Sprintf("%s@%v", m["flow_id"], m["version"]))
		}
		next, ok := r.JSON["next_cursor"].(string)
		if !ok {
			break
		}
		path = "/v1/flows?limit=2&cursor=" + url.QueryEscape(next)
	}
	if got := strings.Join(ids, " "); got != "f1@1 f2@2 f3@1 f5@1" {
		t.Fatalf("pages listed %s", got)
	}
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows?cursor=abc", key, nil), http.StatusBadRequest, "invalid_field", "cursor")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows?limit=0", key, nil), http.StatusBadRequest, "invalid_field", "limit")
}

// Bad definitions are refused with 400 naming the step's field, and nothing
// is saved. (internal/flows' table tests cover every rule; these check that the
// API answers them as it answers any body field, and the checks that need the
// store.)
func TestFlowBadDefinitionsNameTheStep(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("flow-bad")
	h.Template(key, apitest.SimpleTemplate("alert"))
	h.Template(key, templates.Template{ID: "mail_only", Category: "c", Email: &templates.EmailContent{Subject: "s", Text: "t"}})

	for _, tc := range []struct{ body, code, field string }{
		{`{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"]},{"type":"delay","duration":"1s"},
			{"type":"delay","duration":"1s"},{"type":"digest","window":"31d"}]}`, "invalid_field", "steps[3].window"},
		{`{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"]},{"type":"branch","cases":[
			{"if":{"field":"data.x","op":"exists"},"steps":[{"type":"send","template_id":"","channels":["in_app"]}]}]}]}`, "missing_field", "steps[1].cases[0].steps[0].template_id"},
		{`{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"],"window":"5s"}]}`, "unknown_field", "steps[0].window"},
		{`{"category":"c","steps":[{"type":"sned","template_id":"alert","channels":["in_app"]}]}`, "invalid_field", "steps[0].type"},
		{`{"category":"c","steps":[{"type":"wait","step":"later","timeout":"1h"},{"type":"send","id":"later","template_id":"alert","channels":["in_app"]}]}`, "invalid_field", "steps[0].step"},
		{`{"category":"c","steps":[{"type":"send","template_id":"nope","channels":["in_app"]}]}`, "unknown_template", "steps[0].template_id"},
		{`{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"]},{"type":"branch","cases":[{"if":{"field":"user.locale","op":"eq","value":"de"},
			"steps":[{"type":"send","template_id":"mail_only","channels":["email","sms"]}]}]}]}`, "channel_not_in_template", "steps[1].cases[0].steps[0].channels[1]"},
		{`{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"]}],"extra":1}`, "unknown_field", "extra"},
		{`{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"],"id":"a\u0000"}]}`, "invalid_field", "steps[0].id"},
	} {
		r := h.Do(http.MethodPut, "/v1/flows/bad", key, tc.body)
		apitest.WantError(t, r, http.StatusBadRequest, tc.code, tc.field)
	}
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/flows/bad", key, `[1]`), http.StatusBadRequest, "malformed_json", "")
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/flows/-dash", key, commentsFlow), http.StatusBadRequest, "invalid_field", "flow_id")
	big := `{"category":"c","steps":[{"type":"send","template_id":"alert","channels":["in_app"],"id":"` + strings.Repeat("a", 70<<10) + `"}]}`
	apitest.WantError(t, h.Do(http.MethodPut, "/v1/flows/bad", key, big), http.StatusRequestEntityTooLarge, "body_too_large", "")
	apitest.WantError(t, h.Do(http.MethodGet, "/v1/flows/bad", key, nil), http.StatusNotFound, "not_found", "")
}

// The Go client's flow methods, against the real API.
func TestFlowClient(t *testing.T) {
	t.Parallel()
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("flow-client")
	h.Template(key, commentDigestTemplate())
	c, err := client.New(h.URL, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	def := client.FlowDefinition{Category: "comments", Steps: []client.FlowStep{
		{Type: client.FlowStepTypeDigest, Window: client.Ptr("5s")},
		{Type: client.FlowStepTypeSend, TemplateID: client.Ptr("comment_digest"), Channels: []client.ChannelName{"in_app"}},
	}}
	f, err := c.PutFlow(ctx, "comments", def)
	if err != nil || f.Version != 1 || f.FlowID != "comments" {
		t.Fatalf("PutFlow: %+v %v", f, err)
	}
	if f, err = c.PutFlow(ctx, "comments", def); err != nil || f.Version != 2 {
		t.Fatalf("PutFlow again: %+v %v", f, err)
	}
	if got, err := c.GetFlow(ctx, "comments", &client.GetFlowParams{Version: client.Ptr(1)}); err != nil || got.Version != 1 || *got.Steps[0].Window != "5s" {
		t.Fatalf("GetFlow v1: %+v %v", got, err)
	}
	n := 0
	for f, err := range c.AllFlows(ctx, nil) {
		if err != nil || f.FlowID != "comments" {
			t.Fatalf("AllFlows: %+v %v", f, err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("AllFlows walked %d flows", n)
	}
	def.Steps[0].Window = client.Ptr("45d")
	var ce *client.Error
	if _, err := c.PutFlow(ctx, "comments", def); !errors.As(err, &ce) || ce.Status != http.StatusBadRequest || ce.Field != "steps[0].window" {
		t.Fatalf("PutFlow with a 45-day window: %v", err)
	}
	if err := c.DeleteFlow(ctx, "comments"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetFlow(ctx, "comments", nil); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Fatalf("GetFlow after delete: %v", err)
	}
}
