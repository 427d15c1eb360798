package httpd

import (
	"net/http"
)

// InfoSource answers GET /api/info (package info implements it).
type InfoSource interface {
	// Fields parses the fields parameter into category names.
	Fields(arg string, legacy bool) ([]string, error)
	// JSON is the whole reply, envelope included, for those categories.
	JSON(categories []string, legacy bool) []byte
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	legacy, err := queryBool(r, "legacy", true)
	if err != nil {
		return err
	}
	cats, err := s.cfg.Info.Fields(r.URL.Query().Get("fields"), legacy)
	if err != nil {
		return BadParam("fields", err.Error())
	}
	writeBody(w, http.StatusOK, s.cfg.Info.JSON(cats, legacy))
	return nil
}
