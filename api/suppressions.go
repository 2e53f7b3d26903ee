package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/store"
)

// The suppression list (docs/suppressions.md): the tenant's email addresses and
// phone numbers no notification or campaign goes to. Providers' webhooks add to
// it (webhooks.go: applyAddressEvents); these routes let the tenant read it, add
// an address and take one off.
type suppressionsRoom struct {
	responder
	store *store.Store
}

func (h *suppressionsRoom) register(v1, _ gin.IRouter, mw *middleware) {
	v1.GET("/suppressions", h.list)
	v1.GET("/suppressions/:address", h.get)
	v1.PUT("/suppressions/:address", mw.audited(auditSuppressionPut, auditFieldNames), h.put)
	v1.DELETE("/suppressions/:address", mw.audited(auditSuppressionDelete, auditFieldNames), h.delete)
}

// maxSuppressionDetail bounds a tenant's note on an entry (store keeps as much).
const maxSuppressionDetail = 500

// suppressionAddress reads the path's address: an email address or an E.164
// phone number, 400 naming address otherwise.
func suppressionAddress(c *gin.Context) (string, *httpError) {
	a := c.Param("address")
	if strings.Contains(a, "@") {
		if validEmail(a) == nil {
			return a, nil
		}
	} else if validPhone(a) == nil {
		return a, nil
	}
	return "", badField("address", "invalid_field",
		"address must be an email address such as ada@example.com or a phone number in E.164 form such as +14155550100")
}

type putSuppressionRequest struct {
	Detail *string `json:"detail"`
}

// put lists an address (reason manual): 201 when it was not listed, 200 with
// the existing entry (its reason and time kept) when it was. The body is
// optional: {"detail": "why"}.
func (h *suppressionsRoom) put(c *gin.Context) {
	addr, verr := suppressionAddress(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	var req putSuppressionRequest
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &req); err != nil {
			h.abort(c, err)
			return
		}
	}
	detail := ""
	if req.Detail != nil {
		detail = *req.Detail
		if len(detail) > maxSuppressionDetail {
			h.abort(c, badField("detail", "invalid_field", "detail must be at most %d bytes", maxSuppressionDetail))
			return
		}
	}
	e, created, err := h.store.AddSuppression(c.Request.Context(), tenantOf(c).ID, store.Suppression{
		Address: addr, Reason: herald.SuppressionManual, Source: herald.SuppressionSourceAPI, Detail: detail})
	if err != nil {
		h.abort(c, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, e)
}

// get answers an address's entry, 404 when it is not listed.
func (h *suppressionsRoom) get(c *gin.Context) {
	addr, verr := suppressionAddress(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	e, err := h.store.GetSuppression(c.Request.Context(), tenantOf(c).ID, addr)
	if errors.Is(err, herald.ErrNotFound) {
		h.abort(c, notFound("suppression"))
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}

// delete takes an address off the list (whatever put it there): 204, 404 when
// it was not listed. The next send to it goes out.
func (h *suppressionsRoom) delete(c *gin.Context) {
	addr, verr := suppressionAddress(c)
	if verr != nil {
		h.abort(c, verr)
		return
	}
	gone, err := h.store.RemoveSuppression(c.Request.Context(), tenantOf(c).ID, addr)
	if err != nil {
		h.abort(c, err)
		return
	}
	if !gone {
		h.abort(c, notFound("suppression"))
		return
	}
	c.Status(http.StatusNoContent)
}

// list pages the list newest first (?channel=email|sms, ?limit=, ?cursor=).
func (h *suppressionsRoom) list(c *gin.Context) {
	channel := herald.Channel(c.Query("channel"))
	if channel != "" && channel != herald.ChannelEmail && channel != herald.ChannelSMS {
		h.abort(c, badField("channel", "invalid_field", "channel must be email or sms"))
		return
	}
	limit, cur, ok, verr := pageRequest(c, "suppressions")
	if verr != nil {
		h.abort(c, verr)
		return
	}
	var after *store.SuppressionCursor
	if ok {
		after = &store.SuppressionCursor{CreatedAt: time.UnixMicro(cur.At), Address: cur.Key}
	}
	rows, err := h.store.SuppressionPage(c.Request.Context(), tenantOf(c).ID, channel, after, limit+1)
	if err != nil {
		h.abort(c, err)
		return
	}
	items, next := onePage(rows, limit, func(last store.Suppression) pageCursor {
		return pageCursor{List: "suppressions", At: last.CreatedAt.UnixMicro(), Key: last.Address}
	})
	c.JSON(http.StatusOK, gin.H{"items": items, "next_cursor": next})
}
