package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/flows"
	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/jsondecode"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
	"github.com/herald-notify/herald/workflows"
)

// flowsRoom holds the tenants' flows: versioned definitions of steps (send,
// delay, digest, wait, throttle, branch) that POST /v1/notifications with a
// flow_id runs (flow_accept.go). See docs/flows.md.
type flowsRoom struct {
	responder
	store  *store.Store
	flows  *flowCache
	users  *userDirectory
	engine flowEngine
}

// flowCache holds the latest flow versions for the accept path, as
// templateCache does for templates (the same TTL, the same reason); saving or
// deleting through this process evicts at once.
type flowCache struct {
	store *store.Store
	cache *expirable.LRU[string, store.FlowRecord]
}

func newFlowCache(st *store.Store) *flowCache {
	return &flowCache{store: st, cache: expirable.NewLRU[string, store.FlowRecord](10_000, nil, templateCacheTTL)}
}

// latest is the flow's latest live version, cached for templateCacheTTL.
func (fc *flowCache) latest(ctx context.Context, tenantID, flowID string) (store.FlowRecord, error) {
	key := tenantID + "/" + flowID
	if rec, ok := fc.cache.Get(key); ok {
		return rec, nil
	}
	rec, err := fc.store.GetFlow(ctx, tenantID, flowID, 0)
	if err == nil {
		fc.cache.Add(key, rec)
	}
	return rec, err
}

func (fc *flowCache) forget(tenantID, flowID string) { fc.cache.Remove(tenantID + "/" + flowID) }

func (h *flowsRoom) register(v1, public gin.IRouter, mw *middleware) {
	// A save validates at length and reads every template it names: it shares
	// the template saves' rate (its own bucket).
	v1.PUT("/flows/:flow_id", mw.limitCost("tenant-flow-save:", mw.limits.Cost.TemplateSave, "flow saves"),
		mw.audited(auditFlowPut, auditFields), h.putFlow)
	v1.GET("/flows/:flow_id", h.getFlow)
	v1.DELETE("/flows/:flow_id", mw.audited(auditFlowDelete, auditFields), h.deleteFlow)
	v1.GET("/flows", h.listFlows)
	v1.POST("/users/:user_id/digests/:flow_id/flush", mw.audited(auditDigestFlush, auditFields), h.flushDigest)
	v1.GET("/users/:user_id/digests", h.listDigests)
}

// flowView is a stored flow version as the API shows it: the definition as
// the tenant wrote it (no defaults added), with its id, version and save time.
type flowView struct {
	FlowID  string `json:"flow_id"`
	Version int    `json:"version"`
	flows.Definition
	CreatedAt time.Time `json:"created_at"`
}

func viewFlow(rec store.FlowRecord) flowView {
	return flowView{FlowID: rec.FlowID, Version: rec.Version, Definition: rec.Definition, CreatedAt: rec.CreatedAt.UTC()}
}

func validFlowID(v string) *httpError {
	if !templates.ValidID(v) {
		return badField("flow_id", "invalid_field", "flow_id must be %s", templates.IDRule)
	}
	return nil
}

// putFlow saves a flow definition as the flow's next version: 201 when the
// save created the flow (no live version existed), 200 for a new version of a
// live one; both answer the saved version. A definition that does not decode
// or validate (flows.Parse), or whose send steps name a template the tenant
// does not have or a channel it has no content for, is a 400 naming the
// field's path (steps[3].window).
func (h *flowsRoom) putFlow(c *gin.Context) {
	id := c.Param("flow_id")
	if err := validFlowID(id); err != nil {
		h.abort(c, err)
		return
	}
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		h.abort(c, err)
		return
	}
	def, err := flows.Parse(raw)
	if err != nil {
		h.abort(c, flowError(err))
		return
	}
	tenantID := tenantOf(c).ID
	ctx := c.Request.Context()
	if err := h.checkTemplates(ctx, tenantID, def); err != nil {
		h.abort(c, err)
		return
	}
	rec, created, err := h.store.PutFlow(ctx, tenantID, id, def)
	h.flows.forget(tenantID, id)
	if err != nil {
		h.abort(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, viewFlow(rec))
}

// flowError turns a flows.Parse problem into a 400 naming its path.
func flowError(err error) error {
	var fe *jsondecode.Error
	if errors.As(err, &fe) {
		return fieldError(fe)
	}
	return err
}

// checkTemplates checks every send step against the store: its template
// exists (latest live version) and has content for each of the step's
// channels. A flow's send renders with the template's latest version when the
// step runs, so a template changed or deleted after the save is met then
// (the step ends failed, like a notification with no content); this check
// catches the typo at save time.
func (h *flowsRoom) checkTemplates(ctx context.Context, tenantID string, def flows.Definition) error {
	seen := map[string]templates.Template{}
	var walk func(steps []flows.Step, path string) error
	walk = func(steps []flows.Step, path string) error {
		for i, s := range steps {
			at := path + "[" + itoa(i) + "]"
			switch s.Type {
			case flows.StepSend:
				t, ok := seen[s.TemplateID]
				if !ok {
					rec, err := h.store.GetTemplate(ctx, tenantID, s.TemplateID, 0)
					if errors.Is(err, herald.ErrNotFound) {
						return badField(at+".template_id", "unknown_template",
							"template %s does not exist; create it with PUT /v1/templates/{template_id} before the flow that sends it", s.TemplateID)
					}
					if err != nil {
						return err
					}
					t = rec.Template
					seen[s.TemplateID] = t
				}
				for j, ch := range s.Channels {
					if !t.HasChannel(ch) {
						return badField(at+".channels["+itoa(j)+"]", "channel_not_in_template",
							"template %s has no %s content; it has %v", t.ID, ch, t.Channels())
					}
				}
			case flows.StepBranch:
				for j, cs := range s.Cases {
					if err := walk(cs.Steps, at+".cases["+itoa(j)+"].steps"); err != nil {
						return err
					}
				}
				if err := walk(s.Else, at+".else"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(def.Steps, "steps")
}

// getFlow answers the latest live version, or with ?version=N that version
// (readable after a delete: runs started before it go on with their version).
func (h *flowsRoom) getFlow(c *gin.Context) {
	id := c.Param("flow_id")
	if err := validFlowID(id); err != nil {
		h.abort(c, err)
		return
	}
	version := 0
	if v, ok := c.GetQuery("version"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<31-1 {
			h.abort(c, badField("version", "invalid_field", "version must be a positive integer"))
			return
		}
		version = n
	}
	rec, err := h.store.GetFlow(c.Request.Context(), tenantOf(c).ID, id, version)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("flow"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, viewFlow(rec))
}

// listFlows pages the latest version of every live flow, by id (?limit=,
// ?cursor=, as the other lists).
func (h *flowsRoom) listFlows(c *gin.Context) {
	limit, cur, _, verr := pageRequest(c, "flows")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	recs, more, err := h.store.ListFlows(c.Request.Context(), tenantOf(c).ID, cur.Key, limit)
	if err != nil {
		h.abort(c, err)
		return
	}
	items := make([]flowView, 0, len(recs))
	for _, r := range recs {
		items = append(items, viewFlow(r))
	}
	var next *string
	if more {
		next = encodePageCursor(pageCursor{List: "flows", Key: recs[len(recs)-1].FlowID})
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// deleteFlow deletes a flow (every version): 204, or 404 when there is no live
// flow with that id. New events can no longer start it; runs already started
// go on with their version.
func (h *flowsRoom) deleteFlow(c *gin.Context) {
	id := c.Param("flow_id")
	if err := validFlowID(id); err != nil {
		h.abort(c, err)
		return
	}
	deleted, err := h.store.DeleteFlow(c.Request.Context(), tenantOf(c).ID, id)
	h.flows.forget(tenantOf(c).ID, id)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !deleted {
		h.abort(c, notFound("flow"))
		return
	}
	c.Status(http.StatusNoContent)
}

// flushDigestRequest is the optional body of a flush: the digest's key (the
// rendered key, such as "t-42"; absent or "" for a digest without one).
type flushDigestRequest struct {
	Key *string `json:"key"`
}

// flushDigest closes the user's open digest of a flow (and key) now: 202, its
// events are sent as they are; 404 when no such digest is open (another
// tenant's digests are never found: a digest's workflow ID carries the tenant).
func (h *flowsRoom) flushDigest(c *gin.Context) {
	userID, flowID := c.Param("user_id"), c.Param("flow_id")
	if err := validID("user_id", userID); err != nil {
		h.abort(c, err)
		return
	}
	if err := validFlowID(flowID); err != nil {
		h.abort(c, err)
		return
	}
	var req flushDigestRequest
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &req); err != nil {
			h.abort(c, err)
			return
		}
	}
	key := ""
	if req.Key != nil {
		key = *req.Key
	}
	if len(key) > flows.MaxRenderedKeyBytes {
		h.abort(c, badField("key", "invalid_field", "key is at most %d bytes (a digest's rendered key)", flows.MaxRenderedKeyBytes))
		return
	}
	tenantID := tenantOf(c).ID
	ctx, cancel := context.WithTimeout(c.Request.Context(), 10*time.Second)
	defer cancel()
	err := h.engine.FlushDigest(ctx, tenantID, flowID, userID, key)
	switch {
	case errors.Is(err, workflows.ErrRunNotFound):
		h.abort(c, &httpError{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("no open digest of flow %s for user %s with key %q", flowID, userID, key)})
	case err != nil:
		h.abort(c, temporalError(c, err))
	default:
		c.JSON(http.StatusAccepted, gin.H{"flow_id": flowID, "user_id": userID, "key": key, "status": "closing"})
	}
}

// listDigests answers a page of a user's open digests: flow, key, how many
// events each holds and when it closes (a sliding digest's close moves with
// each event). Keyset pages by (flow, key), as the other lists (?limit=,
// ?cursor=).
func (h *flowsRoom) listDigests(c *gin.Context) {
	userID := c.Param("user_id")
	if err := validID("user_id", userID); err != nil {
		h.abort(c, err)
		return
	}
	limit, cur, paged, verr := pageRequest(c, "digests")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	var after *store.OpenDigestsAfter
	if paged {
		flowID, key, _ := strings.Cut(cur.Key, "\x00") // flow ids hold no NUL (validFlowID)
		after = &store.OpenDigestsAfter{FlowID: flowID, Key: key}
	}
	tenantID := tenantOf(c).ID
	_, exists, err := h.users.userLocale(c, tenantID, userID)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !exists {
		h.abort(c, notFound("user"))
		return
	}
	items, more, err := h.engine.OpenDigests(c.Request.Context(), tenantID, userID, after, limit)
	if err != nil {
		h.abort(c, err)
		return
	}
	if items == nil {
		items = []openDigestView{}
	}
	var next *string
	if more {
		last := items[len(items)-1]
		next = encodePageCursor(pageCursor{List: "digests", Key: last.FlowID + "\x00" + last.Key})
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}
