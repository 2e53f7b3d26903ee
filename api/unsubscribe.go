package api

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/herald-notify/herald/internal/herald"
	"github.com/herald-notify/herald/internal/unsubscribe"
)

// errBadUnsubscribeToken answers every token that cannot unsubscribe anyone:
// malformed, tampered with, signed with another key, or naming a user that does
// not exist (the answer is the same, so a token reveals nothing).
var errBadUnsubscribeToken = badField("token", "invalid_token", "this unsubscribe link is not valid")

var unsubscribePage = template.Must(template.New("unsubscribe").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}button{font-size:1rem;padding:.5rem 1rem}</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Text}}</p>
{{- if .Form}}
<form method="post">
<input type="hidden" name="List-Unsubscribe" value="One-Click">
<button type="submit">Unsubscribe</button>
</form>
{{- end}}
</body>
</html>
`))

type unsubscribePageData struct {
	Title, Text string
	// Form shows the confirmation button. The form has no action, so it POSTs to
	// this very URL, token included, wherever a proxy mounts the API.
	Form bool
}

// unsubscribeHeaders keep the token (in the URL) out of caches and Referer
// headers, and the page out of frames (no clickjacked unsubscribe button).
func unsubscribeHeaders(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Header("Referrer-Policy", "no-referrer")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Header("X-Frame-Options", "DENY")
	c.Header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
}

func (h *usersRoom) renderUnsubscribePage(c *gin.Context, status int, d unsubscribePageData) {
	var b bytes.Buffer
	if err := unsubscribePage.Execute(&b, d); err != nil {
		h.abort(c, err)
		return
	}
	c.Data(status, "text/html; charset=utf-8", b.Bytes())
}

// verifyUnsubscribe checks the token of the request: signed by this deployment and
// naming a user that exists.
func (h *usersRoom) verifyUnsubscribe(c *gin.Context) (unsubscribe.Claims, *httpError) {
	if h.unsubscribe == nil {
		return unsubscribe.Claims{}, notFound("route")
	}
	token := c.Query("token")
	if token == "" {
		return unsubscribe.Claims{}, badField("token", "missing_field", "token is required; use the link from the email")
	}
	claims, err := h.unsubscribe.Verify(token)
	if err != nil {
		return claims, errBadUnsubscribeToken
	}
	return claims, nil
}

// wantsHTML: a browser submitting the confirmation form gets a page back; a mail
// client's one-click POST (RFC 8058) and API clients get JSON.
func wantsHTML(c *gin.Context) bool {
	return c.NegotiateFormat(gin.MIMEJSON, gin.MIMEHTML) == gin.MIMEHTML
}

// postUnsubscribe is the RFC 8058 one-click endpoint: no API key, the signed token
// in the URL says which tenant, user and category. It turns the category off in
// the user's preferences (keeping the rest) and answers 200; repeating it is
// harmless. Any body (List-Unsubscribe=One-Click) is ignored. A token that does not
// verify, or names no existing user, answers 400 and changes nothing.
func (h *usersRoom) postUnsubscribe(c *gin.Context) {
	unsubscribeHeaders(c)
	html := wantsHTML(c)
	fail := func(e *httpError) {
		if html && e.Status == http.StatusBadRequest {
			h.renderUnsubscribePage(c, e.Status, unsubscribePageData{Title: "Link not valid",
				Text: "This unsubscribe link is not valid. Use the link from the most recent email."})
			return
		}
		h.abort(c, e)
	}
	claims, verr := h.verifyUnsubscribe(c)
	if verr != nil {
		fail(verr)
		return
	}
	err := h.store.SetCategoryEnabled(c.Request.Context(), claims.TenantID, claims.UserID, claims.Category, false)
	if errors.Is(err, herald.ErrNotFound) {
		fail(errBadUnsubscribeToken)
		return
	}
	if err != nil {
		h.abort(c, err)
		return
	}
	if html {
		h.renderUnsubscribePage(c, http.StatusOK, unsubscribePageData{Title: "Unsubscribed",
			Text: "You will no longer receive " + claims.Category + " notifications."})
		return
	}
	c.JSON(http.StatusOK, gin.H{"unsubscribed": true, "category": claims.Category})
}

// getUnsubscribe shows a confirmation page whose button POSTs the same link: per
// RFC 8058 a GET (a link scanner, a mail client's prefetch) never unsubscribes.
// An invalid link answers 400 with a page saying so.
func (h *usersRoom) getUnsubscribe(c *gin.Context) {
	unsubscribeHeaders(c)
	claims, verr := h.verifyUnsubscribe(c)
	if verr == nil {
		ok, err := h.store.UserExists(c.Request.Context(), claims.TenantID, claims.UserID)
		if err != nil {
			h.abort(c, err)
			return
		}
		if !ok {
			verr = errBadUnsubscribeToken
		}
	}
	if verr != nil {
		if verr.Status != http.StatusBadRequest {
			h.abort(c, verr)
			return
		}
		h.renderUnsubscribePage(c, http.StatusBadRequest, unsubscribePageData{Title: "Link not valid",
			Text: "This unsubscribe link is not valid. Use the link from the most recent email."})
		return
	}
	h.renderUnsubscribePage(c, http.StatusOK, unsubscribePageData{
		Title: "Unsubscribe from " + claims.Category + " notifications?",
		Text:  "You will no longer receive " + claims.Category + " notifications. Other notifications are not affected.",
		Form:  true,
	})
}
