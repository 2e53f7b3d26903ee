package api_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/apitest"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// p99 is the 99th percentile of ds.
func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*99/100)]
}

// slowUpload sends a CSV list at about 4 KB/s for d (a line of ~1 KB every
// 250 ms) and returns the answer's status (0 when the request failed).
func slowUpload(h *apitest.Harness, key string, d time.Duration) int {
	pr, pw := io.Pipe()
	go func() {
		defer pw.Close()
		if _, err := io.WriteString(pw, "user_id,note\n"); err != nil {
			return
		}
		pad := strings.Repeat("x", 1000)
		for i := 0; time.Duration(i)*250*time.Millisecond < d; i++ {
			if _, err := fmt.Fprintf(pw, "slow%05d,%s\n", i, pad); err != nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/lists", pr)
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestSlowListUploadsHoldNoConnection: 20 list uploads sent slowly (about
// 4 KB/s each, from 5 tenants) do not slow another tenant's reads: the p99 of
// its GET /v1/lists/{id} while they run stays within 2x of the p99 measured
// idle (before and after them, in the same round), and no upload holds a
// database connection while its client is still sending. Before, an upload
// streamed into COPY inside a transaction as the client sent it, holding one
// of the API pool's 16 connections for the whole upload: 16 slow uploads took
// them all and every other request waited for an upload to end (7 s: 2077x
// idle). A 2-core machine shared with other work jitters a p99 of a few
// milliseconds by more than 2x now and then, so the ratio must hold in one of
// up to three rounds (the code before the fix misses it by three orders of
// magnitude in every round).
func TestSlowListUploadsHoldNoConnection(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, reader := h.TenantWith("reader")
	list := h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", reader, "user_id\nr1\n", "Content-Type", "text/csv").Str("list_id")
	keys := make([]string, 5) // 4 uploads of a tenant in progress at most
	for i := range keys {
		_, keys[i] = h.TenantWith(fmt.Sprintf("uploader%d", i))
	}
	get := func() time.Duration {
		start := time.Now()
		h.MustDo(http.StatusOK, http.MethodGet, "/v1/lists/"+list, reader, nil)
		return time.Since(start)
	}
	measure := func(d time.Duration) []time.Duration {
		var out []time.Duration
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			out = append(out, get())
		}
		return out
	}
	measure(500 * time.Millisecond) // warm the caches and connections
	var ratio float64
	for round := 1; round <= 3; round++ {
		var copies int
		var idleP99, loadedP99 time.Duration
		ratio, copies, idleP99, loadedP99 = slowUploadRound(t, h, keys, measure)
		t.Logf("round %d: GET p99 idle %s, during 20 slow uploads %s: %.2fx; COPYs holding a connection while the clients sent: at most %d",
			round, idleP99, loadedP99, ratio, copies)
		if copies > 0 {
			t.Fatalf("%d uploads held a database connection (COPY) while their clients were still sending", copies)
		}
		if ratio <= 2 {
			return
		}
	}
	t.Fatalf("another tenant's GET p99 during 20 slow uploads was %.1fx its idle p99 (want <= 2x) in three rounds", ratio)
}

// slowUploadRound measures one round of TestSlowListUploadsHoldNoConnection:
// idle, 20 slow uploads (4 per tenant of keys) with the reads measured while
// they run, idle again.
func slowUploadRound(t *testing.T, h *apitest.Harness, keys []string, measure func(time.Duration) []time.Duration) (
	ratio float64, copies int, idleP99, loadedP99 time.Duration) {
	const uploads, uploadFor = 20, 8 * time.Second
	idle := measure(2 * time.Second)
	statuses := make([]int, uploads)
	var wg sync.WaitGroup
	for i := range uploads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = slowUpload(h, keys[i%len(keys)], uploadFor)
		}()
	}
	time.Sleep(time.Second) // every upload is sending
	// How many uploads hold a database connection (a COPY in progress) while
	// their clients are still sending, sampled on a pool of the test's own.
	copying := make(chan int, 1)
	go func() {
		db, most := testenv.Pool(t), 0
		for end := time.Now().Add(uploadFor - 4*time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			var n int
			if err := db.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'copy%list_upload%' AND state <> 'idle'`).Scan(&n); err == nil {
				most = max(most, n)
			}
		}
		copying <- most
	}()
	loaded := measure(uploadFor - 3*time.Second)
	copies = <-copying
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusCreated {
			t.Fatalf("slow upload %d answered %d", i, st)
		}
	}
	idle = append(idle, measure(2*time.Second)...)
	idleP99, loadedP99 = p99(idle), p99(loaded)
	return float64(loadedP99) / float64(idleP99), copies, idleP99, loadedP99
}

// TestListUploadBounds: a list upload over the tenant's max_list_bytes is a 413
// (declared or not: a chunked body is cut off at the bound) and stores nothing;
// the operator's per-tenant value is over the server default; uploads are rate
// limited per tenant (429 rate_limited), and at most 4 of a tenant's run at once
// in one process.
func TestListUploadBounds(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true, TenantLimits: api.TenantLimits{MaxListBytes: 2000},
		CostLimits: api.CostLimits{ListUpload: api.Bucket{RatePerSecond: 0.001, Burst: 4}}})
	tenantID, key := h.TenantWith("bounds")
	body := "user_id,note\n" + strings.Repeat("u1,"+strings.Repeat("x", 100)+"\n", 30) // ~3.1 KB
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/lists", key, body, "Content-Type", "text/csv"), http.StatusRequestEntityTooLarge, "body_too_large", "")
	// Without a Content-Length (chunked): cut off at the bound.
	req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/lists", io.MultiReader(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked upload over the bound: %d", resp.StatusCode)
	}
	var n int
	if err := h.Store.DB().QueryRow(t.Context(), `SELECT count(*) FROM recipient_lists WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("lists stored after refused uploads: %d %v", n, err)
	}
	// The operator raises this tenant's bound.
	h.TenantLimits(key, store.TenantLimits{MaxListBytes: 10_000})
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, body, "Content-Type", "text/csv")
	// The bucket (4 deep) is spent: three uploads so far, one more, then 429.
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, "user_id\nu1\n", "Content-Type", "text/csv")
	r := h.Do(http.MethodPost, "/v1/lists", key, "user_id\nu1\n", "Content-Type", "text/csv")
	apitest.WantError(t, r, http.StatusTooManyRequests, "rate_limited", "")
}

// TestListUploadsInProgressPerTenant: a fifth upload of one tenant while four
// are still being sent is refused (429 too_many_uploads); another tenant's is
// not.
func TestListUploadsInProgressPerTenant(t *testing.T) {
	h := apitest.Start(t, apitest.Options{NoWorker: true})
	_, key := h.TenantWith("busy")
	_, other := h.TenantWith("calm")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slowUpload(h, key, 3*time.Second)
		}()
	}
	time.Sleep(time.Second)
	apitest.WantError(t, h.Do(http.MethodPost, "/v1/lists", key, "user_id\nu1\n", "Content-Type", "text/csv"),
		http.StatusTooManyRequests, "too_many_uploads", "")
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", other, "user_id\nu1\n", "Content-Type", "text/csv")
	wg.Wait()
	h.MustDo(http.StatusCreated, http.MethodPost, "/v1/lists", key, "user_id\nu1\n", "Content-Type", "text/csv")
}
