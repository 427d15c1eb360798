package redfish

import (
	"net/http"
)

// Versions answers GET /redfish: the protocol versions served and their
// roots (DSP0266), which redfishtool reads first.
func (s *Service) Versions(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, map[string]string{"v1": Root + "/"})
}

// serviceRoot is the ServiceRoot resource.
type serviceRoot struct {
	ID             string `json:"@odata.id"`
	Type           string `json:"@odata.type"`
	Identity       string `json:"Id"`
	Name           string `json:"Name"`
	RedfishVersion string `json:"RedfishVersion"`
	UUID           string `json:"UUID,omitempty"`
	Product        string `json:"Product"`
	Vendor         string `json:"Vendor"`
	Systems        odata  `json:"Systems"`
	Managers       odata  `json:"Managers"`
	SessionService *odata `json:"SessionService,omitempty"`
	Links          struct {
		Sessions *odata `json:"Sessions,omitempty"`
	} `json:"Links"`
}

// Root answers GET /redfish/v1, which needs no login (kvmd's, and
// DSP0266's: a client reads it to find the rest, the session service
// among it).
func (s *Service) Root(w http.ResponseWriter, r *http.Request) error {
	root := serviceRoot{
		ID: Root, Type: "#ServiceRoot.v1_6_0.ServiceRoot", Identity: "RootService", Name: "Root Service",
		RedfishVersion: "1.6.0", UUID: s.cfg.UUID, Product: "kvmd", Vendor: "kvmd",
		Systems: odata{SystemsPath}, Managers: odata{ManagersPath},
	}
	if s.cfg.Sessions != nil {
		root.SessionService = &odata{SessionService}
		root.Links.Sessions = &odata{SessionsPath}
	}
	return writeJSON(w, http.StatusOK, root)
}
