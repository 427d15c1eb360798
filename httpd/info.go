package httpd

import (
	"net/http"
)

// InfoSource answers GET /api/info (package info implements it).
type InfoSource interface {
	// Fields parses the fields parameter into category names.
	Fields(arg string, legacy bool) ([]string, error)
	// Result is the reply's result for those categories, as JSON (an
	// object); the server puts it in the envelope. The server changes
	// neither the names nor the bytes (the source may share them).
	Result(categories []string, legacy bool) []byte
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) error {
	legacy, err := queryBool(r, "legacy", true)
	if err != nil {
		return err
	}
	cats, err := s.cfg.Info.Fields(query(r).Get("fields"), legacy)
	if err != nil {
		return BadParam("fields", err.Error())
	}
	writeResult(w, s.cfg.Info.Result(cats, legacy))
	return nil
}
