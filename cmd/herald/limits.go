package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// runTenantLimits is `herald tenant limits --tenant ID [--rate R] [--burst B]
// [--daily-quota Q] [--allow-critical=true|false] [--max-audience N]
// [--max-concurrent-campaigns N] [--max-list-bytes N]`: the operator sets a
// tenant's limits on POST /v1/notifications, campaigns and list uploads and its
// right to send critical notifications
// (table tenant_limits; a tenant's own key cannot). A flag left out keeps the
// current value, so `--tenant ID` alone prints them. 0 means the server default
// (HERALD_TENANT_RATE, HERALD_TENANT_BURST, HERALD_TENANT_DAILY_QUOTA). Running
// API processes apply a change within their settings cache's 5 s.
func runTenantLimits(ctx context.Context, st *store.Store, args []string, stdout io.Writer) error {
	fs := newFlagSet("tenant limits")
	tenant := fs.String("tenant", "", "tenant id (required; see herald tenant list)")
	rate := fs.Float64("rate", 0, "POST /v1/notifications per second (0: HERALD_TENANT_RATE)")
	burst := fs.Int("burst", 0, "token bucket depth (0: HERALD_TENANT_BURST)")
	quota := fs.Int("daily-quota", 0, "notifications per UTC day (0: HERALD_TENANT_DAILY_QUOTA)")
	critical := fs.Bool("allow-critical", false, "may send critical templates (bypass caps and quiet hours, critical lane)")
	audience := fs.Int64("max-audience", 0, "users one campaign may send to (0: HERALD_CAMPAIGN_MAX_AUDIENCE)")
	concurrent := fs.Int("max-concurrent-campaigns", 0, "campaigns scheduled, running or paused at once (0: HERALD_CAMPAIGN_MAX_CONCURRENT)")
	listBytes := fs.Int64("max-list-bytes", 0, "bytes of one list upload (0: HERALD_LIST_MAX_BYTES)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tenant limits: unexpected argument %q", fs.Arg(0))
	}
	if *tenant == "" {
		return errors.New("tenant limits needs --tenant ID (see herald tenant list)")
	}
	l, err := st.GetTenantLimits(ctx, *tenant)
	if errors.Is(err, herald.ErrNotFound) {
		return fmt.Errorf("tenant %s does not exist (see herald tenant list)", *tenant)
	}
	if err != nil {
		return err
	}
	set := map[string]any{} // the flags given, for the audit log
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "rate":
			l.APIRatePerSecond = *rate
			set["api_rate_per_second"] = *rate
		case "burst":
			l.APIBurst = *burst
			set["api_burst"] = *burst
		case "daily-quota":
			l.DailyQuota = *quota
			set["daily_quota"] = *quota
		case "allow-critical":
			l.AllowCritical = *critical
			set["allow_critical"] = *critical
		case "max-audience":
			l.MaxAudienceSize = *audience
			set["max_audience_size"] = *audience
		case "max-concurrent-campaigns":
			l.MaxConcurrentCampaigns = *concurrent
			set["max_concurrent_campaigns"] = *concurrent
		case "max-list-bytes":
			l.MaxListBytes = *listBytes
			set["max_list_bytes"] = *listBytes
		}
	})
	if len(set) > 0 {
		var le *store.LimitError
		err := audited(ctx, st, *tenant, api.AuditTenantLimitsPut, "tenant_id="+*tenant, set, func() error {
			return st.PutTenantLimits(ctx, *tenant, l)
		})
		if errors.As(err, &le) {
			return fmt.Errorf("tenant limits: %s", le.Message)
		} else if err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "tenant %s: api_rate_per_second %s, api_burst %s, daily_quota %s, allow_critical %t, max_audience_size %s, max_concurrent_campaigns %s, max_list_bytes %s\n", *tenant,
		orDefault(fmt.Sprint(l.APIRatePerSecond), l.APIRatePerSecond == 0), orDefault(fmt.Sprint(l.APIBurst), l.APIBurst == 0),
		orDefault(fmt.Sprint(l.DailyQuota), l.DailyQuota == 0), l.AllowCritical,
		orDefault(fmt.Sprint(l.MaxAudienceSize), l.MaxAudienceSize == 0), orDefault(fmt.Sprint(l.MaxConcurrentCampaigns), l.MaxConcurrentCampaigns == 0),
		orDefault(fmt.Sprint(l.MaxListBytes), l.MaxListBytes == 0))
	return nil
}

func orDefault(v string, isDefault bool) string {
	if isDefault {
		return "0 (server default)"
	}
	return v
}
