package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// webFS holds the dashboard: plain HTML, CSS and JavaScript, no build step
// and nothing fetched from elsewhere, so it works without internet.
//
//go:embed web
var webFS embed.FS

// openAPI is the OpenAPI 3.1 document of the /v1 API.
//
//go:embed openapi.json
var openAPI []byte

// static serves web/ under /static/.
var static = func() http.Handler {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embedded tree always has web/
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}()

// contentSecurity keeps the dashboard to its own assets and API.
const contentSecurity = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

// getIndex serves the dashboard page.
func (s *Server) getIndex(w http.ResponseWriter, _ *http.Request) error {
	page, err := webFS.ReadFile("web/index.html")
	if err != nil {
		return internalError(err)
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", contentSecurity)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(page)
	return nil
}

// getStatic serves the dashboard's assets.
func (s *Server) getStatic(w http.ResponseWriter, r *http.Request) error {
	if strings.HasSuffix(r.URL.Path, "/") {
		return errorf(http.StatusNotFound, CodeNotFound, "no such file: %s", r.URL.Path)
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	static.ServeHTTP(w, r)
	return nil
}

// getOpenAPI serves the OpenAPI document of the API.
func (s *Server) getOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(openAPI)
	return nil
}
