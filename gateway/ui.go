package gateway

import "net/http"

// uiHandler serves the reviewer web pages under /ui/.
func (s *Server) uiHandler() http.Handler {
	return http.NotFoundHandler()
}
