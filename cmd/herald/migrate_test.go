package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/herald-notify/herald/internal/testenv"
	"github.com/herald-notify/herald/workflows"
)

// freshNamespace registers a Temporal namespace of the test's own (24 h
// retention) on the test server and returns its name.
func freshNamespace(t *testing.T) string {
	t.Helper()
	ns := strings.ToLower(testenv.UniqueName(t, "ns"))
	nc, err := client.NewNamespaceClient(client.Options{HostPort: testenv.TemporalAddress(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Register(context.Background(), &workflowservice.RegisterNamespaceRequest{Namespace: ns,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
		t.Fatalf("register namespace %s: %v", ns, err)
	}
	return ns
}

// TestMigrateRegistersSearchAttributes: `herald migrate` registers every search
// attribute of workflows.SearchAttributes (Keyword) on the configured namespace,
// a fresh one here, and says which; a second run finds them all and adds none.
// `herald migrate search-attributes` does the Temporal part alone.
func TestMigrateRegistersSearchAttributes(t *testing.T) {
	ctx := context.Background()
	addr := testenv.TemporalAddress(t)
	ns := freshNamespace(t)
	tc := testenv.TemporalClient(t)
	t.Cleanup(func() {
		_, _ = tc.OperatorService().DeleteNamespace(context.Background(), &operatorservice.DeleteNamespaceRequest{Namespace: ns})
	})
	t.Setenv("HERALD_DATABASE_URL", testenv.DatabaseURL(t))
	t.Setenv("HERALD_TEMPORAL_ADDRESS", addr)
	t.Setenv("HERALD_TEMPORAL_NAMESPACE", ns)

	// A namespace just registered may take the frontend a moment to see:
	// --temporal-wait covers it.
	out, err := runCmd(t, "migrate", "--temporal-wait", "1m")
	if err != nil {
		t.Fatalf("herald migrate: %v\n%s", err, out)
	}
	if !strings.Contains(out, "schema at version ") || !strings.Contains(out, "search attributes: registered ") {
		t.Fatalf("herald migrate said:\n%s", out)
	}
	for _, key := range workflows.SearchAttributes {
		if !strings.Contains(out, key.GetName()) {
			t.Errorf("herald migrate did not say it registered %s:\n%s", key.GetName(), out)
		}
	}
	// The namespace keeps workflows as long as Herald keeps notifications
	// (HERALD_RETENTION_NOTIFICATIONS, 30 days by default), and the
	// maintenance Schedule exists; herald migrate says both.
	if !strings.Contains(out, "namespace "+ns+": workflow retention 720h0m0s (was 24h0m0s)") ||
		!strings.Contains(out, "maintenance schedule "+workflows.MaintenanceScheduleID+": created") {
		t.Errorf("herald migrate did not say it set the retention and the schedule:\n%s", out)
	}
	nsc := tc.WorkflowService()
	desc, err := nsc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if err != nil || desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration() != 720*time.Hour {
		t.Errorf("namespace retention after herald migrate: %v, %v", desc.GetConfig().GetWorkflowExecutionRetentionTtl(), err)
	}

	have, err := tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(workflows.SearchAttributes) < 5 {
		t.Fatalf("workflows.SearchAttributes lists %d keys, want at least 5", len(workflows.SearchAttributes))
	}
	for _, key := range workflows.SearchAttributes {
		if typ, ok := have.GetCustomAttributes()[key.GetName()]; !ok || typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			t.Errorf("namespace %s: search attribute %s is %v (present %v), want Keyword", ns, key.GetName(), typ, ok)
		}
	}

	for _, args := range [][]string{{"migrate"}, {"migrate", "search-attributes"}} {
		out, err = runCmd(t, args...)
		if err != nil {
			t.Fatalf("herald %v again: %v\n%s", args, err, out)
		}
		if !strings.Contains(out, "search attributes: all ") || strings.Contains(out, "search attributes: registered") {
			t.Errorf("herald %v again said:\n%s", args, out)
		}
		if args[len(args)-1] == "migrate" && !strings.Contains(out, "maintenance schedule "+workflows.MaintenanceScheduleID+": updated") {
			t.Errorf("herald migrate again said:\n%s", out)
		}
	}
}

// TestMigrateWithoutTemporalLeavesItAlone: with HERALD_TEMPORAL_ADDRESS unset,
// `herald migrate` migrates the schema only and says so.
func TestMigrateWithoutTemporalLeavesItAlone(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", testenv.DatabaseURL(t))
	t.Setenv("HERALD_TEMPORAL_ADDRESS", "")
	out, err := runCmd(t, "migrate")
	if err != nil {
		t.Fatalf("herald migrate: %v\n%s", err, out)
	}
	if !strings.Contains(out, "schema at version ") || !strings.Contains(out, "search attributes: not registered (HERALD_TEMPORAL_ADDRESS is not set)") {
		t.Fatalf("herald migrate said:\n%s", out)
	}
}

// TestSearchAttributeNamesOnlyInGo: workflows.SearchAttributes is the one list
// of search attributes; the scripts, the Makefile and docker-compose.yml
// register through `herald migrate` and name none of them.
func TestSearchAttributeNamesOnlyInGo(t *testing.T) {
	files, err := filepath.Glob("../../scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../Makefile", "../../docker-compose.yml")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range workflows.SearchAttributes {
			if strings.Contains(string(raw), key.GetName()) {
				t.Errorf("%s names the search attribute %s: register through `herald migrate` (workflows.SearchAttributes) instead", f, key.GetName())
			}
		}
	}
}
