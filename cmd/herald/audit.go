package main

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/herald-notify/herald/api"
	"github.com/herald-notify/herald/internal/store"
)

// audited records an operator CLI change in the tenant's audit log (GET
// /v1/audit-log), as the API's audited middleware does for the operator API:
// written ahead as pending, completed after the change, removed when the change
// failed (a CLI change is one statement: an error means nothing was applied).
// api_key_id is api.AuditOperatorCLIKeyID: whoever ran the binary held the
// database's credentials, which no API key stands for.
func audited(ctx context.Context, st *store.Store, tenantID, action, target string, details map[string]any, change func() error) error {
	raw, err := json.Marshal(map[string]any{"request": details}) // the API's shape: details.request
	if err != nil {
		return err
	}
	id, err := st.BeginAudit(ctx, tenantID, store.AuditEntry{APIKeyID: api.AuditOperatorCLIKeyID, Action: action, Target: target, Details: raw})
	if err != nil {
		return err
	}
	changeErr := change()
	if err := st.FinishAudit(context.WithoutCancel(ctx), tenantID, id, http.StatusOK, changeErr == nil); err != nil && changeErr == nil {
		return err
	}
	return changeErr
}
