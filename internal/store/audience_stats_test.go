package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/testenv"
)

// sendRightAfterBulkInsert does what a campaign does with an audience of n
// users imported a moment ago: it counts the audience (CampaignStart) and reads
// it page by page (CampaignPages, then each batch's AudiencePage), with the
// planner statistics of users and recipient_list_members taken before the
// tenant existed, as uploadRightAfterBulkInsert sets them up (one rolled-back
// transaction). It returns how long the count and the pages took.
func sendRightAfterBulkInsert(tb testing.TB, kind string, n int) time.Duration {
	tb.Helper()
	ctx := context.Background()
	tx, err := testenv.Pool(tb).Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	st := store.New(tx)
	tn := tenantAfterStaleStatistics(tb, tx, st)
	users := make([]store.User, n)
	for i := range users {
		users[i] = store.User{UserID: fmt.Sprintf("u%07d", i+1)}
	}
	if err := st.InsertUsers(ctx, tn.ID, users); err != nil {
		tb.Fatal(err)
	}
	ref := ""
	if kind == herald.AudienceList {
		ref = "lst_test"
		if _, err := st.UploadList(ctx, tn.ID, ref, "test", &generatedList{n: n}); err != nil {
			tb.Fatal(err)
		}
	}

	const pageSize = 500
	start := time.Now()
	known, _, err := st.CountAudience(ctx, tn.ID, kind, ref)
	if err != nil {
		tb.Fatal(err)
	}
	read, after := 0, ""
	for {
		ends, err := st.AudienceBoundaries(ctx, store.AudienceBoundariesParams{TenantID: tn.ID, Kind: kind, Ref: ref, After: after, PageSize: pageSize, Pages: 8})
		if err != nil {
			tb.Fatal(err)
		}
		for _, through := range ends {
			page, err := st.AudiencePage(ctx, store.AudiencePageParams{TenantID: tn.ID, Kind: kind, Ref: ref, After: after, Through: through, Limit: pageSize})
			if err != nil {
				tb.Fatal(err)
			}
			read += len(page)
			after = through
		}
		if len(ends) < 8 {
			break
		}
	}
	took := time.Since(start)
	if read != int(known) || known < int64(n)*99/100 {
		tb.Fatalf("%s audience of %d users: counted %d, read %d", kind, n, known, read)
	}
	return took
}

// A campaign to users imported a moment ago costs the same per recipient at
// 1,000 and 10,000 users, however stale the planner's statistics, for every
// audience that joins users (all users, a list): before the probes, 10,000
// users took 116-121x as long as 1,000 (15.5 s). Measured as a ratio in the
// same run, within 2x of flat per recipient (the fixed cost of a page weighs
// more at 1,000); each size keeps its fastest of three.
func TestCampaignAudienceRightAfterBulkInsertIsLinear(t *testing.T) {
	const small, large = 1_000, 10_000
	for _, kind := range []string{herald.AudienceAllUsers, herald.AudienceList} {
		var smallTook, largeTook time.Duration
		for range 3 {
			if d := sendRightAfterBulkInsert(t, kind, small); smallTook == 0 || d < smallTook {
				smallTook = d
			}
		}
		var ratio float64
		for range 3 {
			if d := sendRightAfterBulkInsert(t, kind, large); largeTook == 0 || d < largeTook {
				largeTook = d
			}
			if ratio = largeTook.Seconds() / smallTook.Seconds(); ratio <= 20 {
				break
			}
		}
		t.Logf("%s: %d users %.3f s, %d users %.3f s, ratio %.1f for %dx the users", kind, small, smallTook.Seconds(), large, largeTook.Seconds(), ratio, large/small)
		if ratio > 20 {
			t.Errorf("%s: an audience of %d took %.1fx as long as one of %d; want at most 20x", kind, large, ratio, small)
		}
	}
}
