package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
	"github.com/herald-notify/herald/internal/templates"
)

// maxTemplateBodyBytes caps a PUT /v1/templates body. It is larger than
// maxBodyBytes because the template sources alone may add up to
// templates.MaxTemplateBytes, and JSON escaping and the object around them come on
// top; templates.Validate then enforces the limits on the sources themselves.
const maxTemplateBodyBytes = 256 << 10

// templatesRoom holds the tenants' templates and their preview.
type templatesRoom struct {
	responder
	store     *store.Store
	templates *templateCache
}

func (h *templatesRoom) register(v1, public gin.IRouter, mw *middleware) {
	v1.PUT("/templates/:template_id", mw.limitCost("tenant-template-save:", mw.limits.Cost.TemplateSave, "template saves"),
		mw.audited(auditTemplatePut, auditFields), h.putTemplate)
	v1.GET("/templates/:template_id", h.getTemplate)
	v1.DELETE("/templates/:template_id", mw.audited(auditTemplateDelete, auditFields), h.deleteTemplate)
	v1.GET("/templates", h.listTemplates)
	v1.POST("/templates/:template_id/preview", mw.limitCost("tenant-preview:", mw.limits.Cost.Preview, "previews"), h.previewTemplate)
}

// templateCacheTTL bounds how long another API replica may keep accepting with the
// previous version of a template that was just saved.
const templateCacheTTL = 2 * time.Second

// templateCache holds the latest template versions for the accept paths (see
// templateCacheTTL); saving or deleting through this process evicts at once.
type templateCache struct {
	store *store.Store
	cache *expirable.LRU[string, store.TemplateRecord]
}

func newTemplateCache(st *store.Store) *templateCache {
	return &templateCache{store: st, cache: expirable.NewLRU[string, store.TemplateRecord](10_000, nil, templateCacheTTL)}
}

// latest is the template's latest version, cached for templateCacheTTL.
func (tc *templateCache) latest(ctx context.Context, tenantID, templateID string) (store.TemplateRecord, error) {
	key := tenantID + "/" + templateID
	if rec, ok := tc.cache.Get(key); ok {
		return rec, nil
	}
	rec, err := tc.store.GetTemplate(ctx, tenantID, templateID, 0)
	if err == nil {
		tc.cache.Add(key, rec)
	}
	return rec, err
}

// forget drops the cached version of a template saved or deleted through this
// process.
func (tc *templateCache) forget(tenantID, templateID string) {
	tc.cache.Remove(tenantID + "/" + templateID)
}

// putTemplateRequest is a template as a tenant writes it: everything but the id
// (from the path) and the version (assigned on save).
type putTemplateRequest struct {
	Category      string                       `json:"category"`
	Critical      bool                         `json:"critical"`
	DefaultLocale string                       `json:"default_locale"`
	Ordering      string                       `json:"ordering"`
	Email         *templates.EmailContent      `json:"email"`
	SMS           *templates.SMSContent        `json:"sms"`
	Push          *templates.PushContent       `json:"push"`
	InApp         *templates.InAppContent      `json:"in_app"`
	Locales       map[string]templates.Variant `json:"locales"`
}

// templateView is a stored template version as the API shows it.
type templateView struct {
	templates.Template
	// Channels are the channels the template has content for: the default
	// channels of a notification sent with it.
	Channels  []herald.Channel `json:"channels"`
	CreatedAt time.Time        `json:"created_at"`
}

func viewTemplate(rec store.TemplateRecord) templateView {
	return templateView{Template: rec.Template, Channels: rec.Template.Channels(), CreatedAt: rec.CreatedAt.UTC()}
}

// validationError is an error body that lists every problem found, not only the
// first: {"error": {"code", "message", "field", "errors": [...]}}.
type validationError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Errors  any    `json:"errors"`
}

// templateFieldPath is the body path of a template problem: "email.html",
// "locales.de.push.title", "category"; "" for the template as a whole.
func templateFieldPath(e templates.FieldError) string {
	var parts []string
	if e.Locale != "" {
		parts = append(parts, "locales", e.Locale)
	}
	if e.Channel != "" {
		parts = append(parts, string(e.Channel))
	}
	if e.Field != "template" && (e.Field != "locales" || e.Locale == "") {
		parts = append(parts, e.Field)
	}
	return strings.Join(parts, ".")
}

// putTemplate saves a template as its next version: 201 when the save created the
// template (no live version existed: the first save, or the first after a delete),
// 200 when it is a new version of a live one. Version numbers keep counting after a
// delete, so a number is never reused. Problems found by templates.Validate answer
// 422 invalid_template listing every one with its channel, field, locale and line.
func (h *templatesRoom) putTemplate(c *gin.Context) {
	id := c.Param("template_id")
	if err := validTemplateID(id); err != nil {
		h.abort(c, err)
		return
	}
	var req putTemplateRequest
	if err := decodeJSONLimit(c, &req, maxTemplateBodyBytes); err != nil {
		h.abort(c, err)
		return
	}
	tenantID := tenantOf(c).ID
	ctx := c.Request.Context()
	if req.Critical {
		// The right to send critical notifications is the operator's (read fresh,
		// not from the accept path's cache: a grant applies to the next save).
		l, err := h.store.GetTenantLimits(ctx, tenantID)
		if err != nil {
			h.abort(c, err)
			return
		}
		if !l.AllowCritical {
			h.abort(c, operatorOnly("critical", "critical templates bypass opt-outs, caps and quiet hours and share the critical lane; "+
				"the operator has not allowed this tenant to send them (herald tenant limits --allow-critical=true)"))
			return
		}
	}
	if req.Ordering != "" && !herald.IsOrderingKey(req.Ordering) {
		h.abort(c, badField("ordering", "invalid_field", "ordering is an ordering key (\"user\": one lane per user and channel): 1 to %d letters, digits, '_', '-', '.', ':' or '/'", herald.MaxOrderingKeyLen))
		return
	}
	t := templates.Template{ID: id, Category: req.Category, Critical: req.Critical, DefaultLocale: req.DefaultLocale, Ordering: req.Ordering,
		Email: req.Email, SMS: req.SMS, Push: req.Push, InApp: req.InApp, Locales: req.Locales}
	if errs := templates.Validate(t); len(errs) > 0 {
		msg := errs[0].Error()
		if len(errs) > 1 {
			msg = fmt.Sprintf("%s (and %d more problems, see errors)", msg, len(errs)-1)
		}
		c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"error": validationError{
			Code: "invalid_template", Message: msg, Field: templateFieldPath(errs[0]), Errors: errs,
		}})
		return
	}
	_, err := h.store.GetTemplate(ctx, tenantID, id, 0)
	existed := err == nil
	if err != nil && !errors.Is(err, herald.ErrNotFound) {
		h.abort(c, err)
		return
	}
	rec, err := h.store.PutTemplate(ctx, tenantID, t)
	h.templates.forget(tenantID, t.ID)
	if err != nil {
		h.abort(c, err)
		return
	}
	status := http.StatusOK
	if !existed || rec.Template.Version == 1 {
		status = http.StatusCreated
	}
	c.JSON(status, viewTemplate(rec))
}

// getTemplate returns the latest live version, or with ?version=N that version.
// A given version stays readable after the template is deleted: notifications
// accepted before the delete still render with it.
func (h *templatesRoom) getTemplate(c *gin.Context) {
	id := c.Param("template_id")
	if err := validTemplateID(id); err != nil {
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
	rec, ok := h.templateVersion(c, id, version)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, viewTemplate(rec))
}

// listTemplates pages the latest version of every live template, by id: ?limit=
// (defaultPageLimit, at most maxPageLimit) and ?cursor= (next_cursor of the page
// before; null on the last page).
func (h *templatesRoom) listTemplates(c *gin.Context) {
	limit, cur, _, verr := pageRequest(c, "templates")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	recs, more, err := h.store.ListTemplates(c.Request.Context(), tenantOf(c).ID, cur.Key, limit)
	if err != nil {
		h.abort(c, err)
		return
	}
	items := make([]templateView, 0, len(recs))
	for _, r := range recs {
		items = append(items, viewTemplate(r))
	}
	var next *string
	if more {
		next = encodePageCursor(pageCursor{List: "templates", Key: recs[len(recs)-1].Template.ID})
	}
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}

// deleteTemplate deletes a template (every version): 204, or 404 when there is no
// live template with that id. New notifications can no longer use it; accepted
// ones still render with their version.
func (h *templatesRoom) deleteTemplate(c *gin.Context) {
	id := c.Param("template_id")
	if err := validTemplateID(id); err != nil {
		h.abort(c, err)
		return
	}
	deleted, err := h.store.DeleteTemplate(c.Request.Context(), tenantOf(c).ID, id)
	h.templates.forget(tenantOf(c).ID, id)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !deleted {
		h.abort(c, notFound("template"))
		return
	}
	c.Status(http.StatusNoContent)
}

// templateVersion reads a template version (0: the latest) of the caller's tenant,
// answering 404 (or the error) itself when there is none.
func (h *templatesRoom) templateVersion(c *gin.Context, id string, version int) (store.TemplateRecord, bool) {
	rec, err := h.store.GetTemplate(c.Request.Context(), tenantOf(c).ID, id, version)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("template"))
		return rec, false
	}
	if err != nil {
		h.abort(c, err)
		return rec, false
	}
	return rec, true
}

// missingVariablesError is the 422 for data that lacks variables a template needs.
func missingVariablesError(missing []string) *httpError {
	return &httpError{Status: http.StatusUnprocessableEntity, Code: "missing_variables", Field: "data",
		Message: fmt.Sprintf("data lacks variables the template needs: %s", strings.Join(missing, ", ")), Missing: missing}
}
