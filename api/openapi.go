package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// OpenAPIDocument describes this API; it is served at /openapi.yaml and the API tests
// validate live responses against it.
//
//go:embed openapi.yaml
var OpenAPIDocument []byte

func serveOpenAPI(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml", OpenAPIDocument)
}
