package api_test

import (
	"context"
	"testing"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/herald-notify/herald/internal/apitest"
)

func tenantOfKey(t *testing.T, h *apitest.Harness, key string) string {
	t.Helper()
	tn, err := h.Store.TenantByAPIKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tn.ID
}

func countRequest(query string) *workflowservice.CountWorkflowExecutionsRequest {
	return &workflowservice.CountWorkflowExecutionsRequest{Namespace: "default", Query: query}
}
