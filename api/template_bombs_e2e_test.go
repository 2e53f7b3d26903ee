package api_test

import (
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/templates"
)

// maxBombAlloc bounds what the API and the worker (both in this process) may
// allocate while a template bomb is saved, previewed or delivered.
const maxBombAlloc = 64 << 20

// doubling is the largest {{$x = print $x $x}} bomb that fits one field:
// 2^800 bytes unbounded. seed is its first value: a constant (the dry run on
// save meets it) or a variable (it needs data, so only a render meets it).
func doubling(seed string) string {
	prefix, step := `{{$x := `+seed+`}}`, `{{$x = print $x $x}}`
	return prefix + strings.Repeat(step, (templates.MaxFieldBytes-len(prefix))/len(step))
}

// allocatedBy is the process's TotalAlloc delta while fn runs.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Saving a data-free bomb is a 422 naming its field (saving dry-runs every
// field), and the API allocates a bounded amount doing so. Not parallel: the
// allocation is measured for the whole process.
func TestTemplateBombSaveIs422(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.Tenant("bombs")
	tests := []struct {
		name, field string
		body        map[string]any
	}{
		{"email html (executed on save)", "email.html", map[string]any{"category": "c",
			"email": map[string]any{"subject": "s", "html": doubling(`"<"`)}}},
		{"sms text", "sms.text", map[string]any{"category": "c", "sms": map[string]any{"text": doubling(`"a"`)}}},
		{"printf width", "sms.text", map[string]any{"category": "c", "sms": map[string]any{"text": `{{printf "%999999999d" 1}}`}}},
		{"loop of steps", "push.body", map[string]any{"category": "c",
			"push": map[string]any{"body": `{{range 10000}}` + strings.Repeat(`{{if 1}}{{end}}`, 1000) + `{{end}}`}}},
		{"de variant", "locales.de.in_app.body", map[string]any{"category": "c", "in_app": map[string]any{"body": "hi"},
			"locales": map[string]any{"de": map[string]any{"in_app": map[string]any{"body": doubling(`"a"`)}}}}},
	}
	for _, tc := range tests {
		var r apitest.Response
		got := allocatedBy(func() { r = h.Do(http.MethodPut, "/v1/templates/bomb", key, tc.body) })
		apitest.WantError(t, r, http.StatusUnprocessableEntity, "invalid_template", tc.field)
		msg := r.JSON["error"].(map[string]any)["message"].(string)
		t.Logf("%s: %d KiB allocated: %s", tc.name, got>>10, msg)
		if got > maxBombAlloc {
			t.Errorf("%s: saving allocated %d MiB, want < %d MiB", tc.name, got>>20, maxBombAlloc>>20)
		}
	}
	h.MustDo(http.StatusNotFound, http.MethodGet, "/v1/templates/bomb", key, nil) // nothing saved
	h.MustDo(http.StatusOK, http.MethodGet, "/healthz", "", nil)
}

// A bomb that needs data is saved (the dry run stops at its first variable),
// then fails where it runs: the preview answers 422 render_failed, and so does
// the submission (every requested channel is rendered at submit time, so it is
// never accepted to fail later). The API allocates a bounded amount doing so.
// Not parallel (see above).
func TestTemplateBombNeedingDataFailsRender(t *testing.T) {
	h := apitest.Start(t, apitest.Options{})
	_, key := h.Tenant("bombs")
	h.MustDo(http.StatusCreated, http.MethodPut, "/v1/templates/bomb", key, map[string]any{"category": "c",
		"email": map[string]any{"subject": "s", "html": doubling(`.seed`)},
		"sms":   map[string]any{"text": doubling(`.seed`)}})
	data := map[string]any{"seed": "<b>"}

	var r apitest.Response
	got := allocatedBy(func() {
		r = h.Do(http.MethodPost, "/v1/templates/bomb/preview", key, map[string]any{"data": data})
	})
	apitest.WantError(t, r, http.StatusUnprocessableEntity, "render_failed", "data")
	t.Logf("preview: %d KiB allocated: %s", got>>10, r.JSON["error"].(map[string]any)["message"])
	if got > maxBombAlloc {
		t.Errorf("preview allocated %d MiB, want < %d MiB", got>>20, maxBombAlloc>>20)
	}

	h.PutUser(key, "ada", map[string]any{"email": "ada@example.com", "phone": "+14155550100"})
	got = allocatedBy(func() {
		r = h.Submit(key, map[string]any{"user_id": "ada", "template_id": "bomb", "data": data, "channels": []string{"email", "sms"}})
	})
	apitest.WantError(t, r, http.StatusUnprocessableEntity, "render_failed", "data")
	t.Logf("submit: %d KiB allocated", got>>10)
	if got > maxBombAlloc {
		t.Errorf("submit allocated %d MiB, want < %d MiB", got>>20, maxBombAlloc>>20)
	}
	h.MustDo(http.StatusOK, http.MethodGet, "/healthz", "", nil)
}
