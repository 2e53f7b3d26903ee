package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/herald-notify/herald/internal/config"
	"github.com/herald-notify/herald/internal/store"
)

// runData is the operator's view of what the database keeps:
//
//	herald data usage [--tenant ID]
//
// Without --tenant: every table's rows (the planner's estimate), size with
// indexes and TOAST, and oldest row, then the tenants the statistics name as
// each table's biggest users with their estimated share. With --tenant: that
// tenant's usage, as GET /v1/usage answers it. Costs are bounded as in
// store.TenantUsage: catalog and pg_stats reads, counts stopped at 10,000
// rows, oldest-row queries abandoned after 250 ms.
func runData(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "usage" {
		return errUsage
	}
	fs := newFlagSet("data usage")
	tenant := fs.String("tenant", "", "one tenant's usage (id; see herald tenant list)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("data usage: unexpected argument %q", fs.Arg(0))
	}
	pool, err := store.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	st := store.New(pool)
	if *tenant != "" {
		if _, err := st.TenantByID(ctx, *tenant); err != nil {
			return errors.Join(fmt.Errorf("tenant %s does not exist (see herald tenant list)", *tenant), err)
		}
		u, err := st.TenantUsage(ctx, *tenant)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "tenant %s: %d rows, ~%s\n", *tenant, u.Rows, bytesText(u.Bytes))
		return printUsage(stdout, u, true)
	}
	u, err := st.AllUsage(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "all tenants: ~%d rows, %s\n", u.Rows, bytesText(u.Bytes))
	if err := printUsage(stdout, u, false); err != nil {
		return err
	}
	shares, err := st.TenantShares(ctx)
	if err != nil {
		return err
	}
	if len(shares) == 0 {
		fmt.Fprintln(stdout, "\nno per-tenant statistics yet (the tables have not been analysed)")
		return nil
	}
	fmt.Fprintf(stdout, "\nthe %d biggest tenants of each table (estimated from pg_stats):\n", topTenants)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tTENANT\tSHARE\tROWS\tBYTES")
	perTable := map[string]int{}
	for _, s := range shares { // biggest first within each table
		if perTable[s.Table]++; perTable[s.Table] > topTenants {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t~%d\t~%s\n", s.Table, s.TenantID, 100*s.Fraction, s.Rows, bytesText(s.Bytes))
	}
	return tw.Flush()
}

// topTenants is how many tenants `herald data usage` lists per table.
const topTenants = 3

func printUsage(w io.Writer, u store.Usage, tenant bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tROWS\tBYTES\tOLDEST")
	for _, t := range u.Tables {
		if tenant && t.Rows == 0 {
			continue
		}
		rows := fmt.Sprint(t.Rows)
		if !t.RowsExact {
			rows = "~" + rows
		}
		oldest := "-"
		switch {
		case t.Oldest != nil:
			oldest = t.Oldest.UTC().Format(time.RFC3339) + " (" + t.OldestColumn + ")"
		case t.OldestUnknown:
			oldest = "? (no index answers it quickly)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Table, rows, bytesText(t.Bytes), oldest)
	}
	return tw.Flush()
}

// bytesText is n in B, KiB, MiB or GiB.
func bytesText(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k:
		return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	case n >= k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	}
	return fmt.Sprintf("%d B", n)
}
