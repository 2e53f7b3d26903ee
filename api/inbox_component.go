package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// The <herald-inbox> web component and its demo page, embedded in the binary.
const (
	inboxComponentPath = "/inbox/herald-inbox.js"
	InboxDemoPath      = "/inbox/demo"
)

var (
	//go:embed web/herald-inbox.js
	inboxComponentJS []byte
	//go:embed web/demo.html
	inboxDemoHTML []byte
)

// serveInboxComponent serves the component to any origin (it is public code;
// a page on the tenant's site loads it as a module script, a CORS request).
func serveInboxComponent(c *gin.Context) {
	c.Header("Access-Control-Allow-Origin", "*")
	c.Header("Cache-Control", "public, max-age=300")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Data(http.StatusOK, "text/javascript; charset=utf-8", inboxComponentJS)
}

// serveInboxDemo serves the demo page; the user and token ride in the URL's
// fragment, which never reaches a server.
func serveInboxDemo(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Header("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	c.Data(http.StatusOK, "text/html; charset=utf-8", inboxDemoHTML)
}
