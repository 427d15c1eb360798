package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"kvmd/msd"
)

// Managers answers GET /redfish/v1/Managers: the one manager, the KVM.
func (s *Service) Managers(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, newCollection(ManagersPath, "#ManagerCollection.ManagerCollection", "Manager Collection", ManagerPath))
}

// Manager answers GET /redfish/v1/Managers/BMC.
func (s *Service) Manager(w http.ResponseWriter, r *http.Request) error {
	m := map[string]any{
		"@odata.id": ManagerPath, "@odata.type": "#Manager.v1_15_0.Manager",
		"Id": "BMC", "Name": "kvmd Manager", "Description": "The KVM over IP's Baseboard Management Controller",
		"ManagerType": "BMC", "FirmwareVersion": s.cfg.Version,
		"VirtualMedia": odata{VirtualMediaPath},
	}
	if _, _, err := s.system(); err == nil {
		m["Links"] = map[string]any{"ManagerForServers": []odata{{SystemPath}}}
	}
	return writeJSON(w, http.StatusOK, m)
}

// VirtualMediaCollection answers GET /redfish/v1/Managers/BMC/VirtualMedia:
// the MSD when the daemon has one.
func (s *Service) VirtualMediaCollection(w http.ResponseWriter, r *http.Request) error {
	var members []string
	if s.cfg.Media != nil {
		members = append(members, MediaPath)
	}
	return writeJSON(w, http.StatusOK, newCollection(VirtualMediaPath, "#VirtualMediaCollection.VirtualMediaCollection", "Virtual Media Collection", members...))
}

func (s *Service) media() (Media, error) {
	if s.cfg.Media == nil {
		return nil, notFound("VirtualMedia", "MSD")
	}
	return s.cfg.Media, nil
}

// pikvmOem is kvmd's Oem part of the VirtualMedia resource, with the
// image being written (an InsertMedia's download) beside it.
type pikvmOem struct {
	Context      string         `json:"@odata.context"`
	Type         string         `json:"@odata.type"`
	MsdEnabled   bool           `json:"MsdEnabled"`
	MsdOnline    bool           `json:"MsdOnline"`
	MsdBusy      bool           `json:"MsdBusy"`
	DriveOptical *bool          `json:"DriveOptical"`
	Uploading    *msd.Uploading `json:"Uploading"`
}

type virtualMedia struct {
	ID             string   `json:"@odata.id"`
	Type           string   `json:"@odata.type"`
	Identity       string   `json:"Id"`
	Name           string   `json:"Name"`
	Description    string   `json:"Description"`
	MediaTypes     []string `json:"MediaTypes"`
	Image          *string  `json:"Image"`
	ImageName      *string  `json:"ImageName"`
	ConnectedVia   string   `json:"ConnectedVia"`
	Inserted       *bool    `json:"Inserted"`
	WriteProtected *bool    `json:"WriteProtected"`
	Oem            struct {
		PiKVM pikvmOem `json:"PiKVM"`
	} `json:"Oem"`
	Actions struct {
		Insert struct {
			Target string `json:"target"`
		} `json:"#VirtualMedia.InsertMedia"`
		Eject struct {
			Target string `json:"target"`
		} `json:"#VirtualMedia.EjectMedia"`
	} `json:"Actions"`
}

// VirtualMedia answers GET /redfish/v1/Managers/BMC/VirtualMedia/MSD: the
// image chosen (Image is the URL it was inserted from, when it was),
// whether it is connected, and kvmd's Oem part.
func (s *Service) VirtualMedia(w http.ResponseWriter, r *http.Request) error {
	m, err := s.media()
	if err != nil {
		return err
	}
	st := m.State()
	vm := virtualMedia{ID: MediaPath, Type: "#VirtualMedia.v1_4_0.VirtualMedia", Identity: "MSD",
		Name: "Virtual CD/DVD/Flash Drive", Description: "The KVM's virtual CD/DVD/flash drive",
		MediaTypes: []string{"USBStick", "CD", "DVD"}, ConnectedVia: "NotConnected"}
	oem := &vm.Oem.PiKVM
	oem.Context, oem.Type = "/redfish/v1/$metadata#PiKVMVirtualMedia.PiKVMVirtualMedia", "#PiKVMVirtualMedia.v1_0_0.PiKVMVirtualMedia"
	oem.MsdEnabled, oem.MsdOnline, oem.MsdBusy = st.Enabled, st.Online, st.Busy
	if st.Storage != nil {
		oem.Uploading = st.Storage.Uploading
	}
	if d := st.Drive; d != nil {
		inserted, wp, cd := d.Connected, !d.RW, d.CDROM
		vm.Inserted, vm.WriteProtected, oem.DriveOptical = &inserted, &wp, &cd
		if d.Image != nil {
			name, image := d.Image.Name, d.Image.Name
			vm.ConnectedVia = "Oem"
			s.mu.Lock()
			if u, ok := s.urls[name]; ok {
				image, vm.ConnectedVia = u, "URI"
			}
			s.mu.Unlock()
			vm.Image, vm.ImageName = &image, &name
		}
	}
	vm.Actions.Insert.Target, vm.Actions.Eject.Target = InsertPath, EjectPath
	return writeJSON(w, http.StatusOK, vm)
}

// insertParams are InsertMedia's parameters (VirtualMedia.v1_4_0).
var insertParams = []string{"Image", "Inserted", "WriteProtected", "TransferMethod", "TransferProtocolType", "UserName", "Password"}

// InsertMedia answers POST .../VirtualMedia.InsertMedia {"Image": ...}:
// an image in the storage by its name, or an http(s) URL, which is first
// downloaded into the storage as write_remote does (the answer waits for
// it; an EjectMedia or the client going away stops it, leaving nothing).
// The image is then chosen, as a CD-ROM when its name ends in .iso
// (kvmd's rule), read-only unless WriteProtected is false, and connected
// unless Inserted is false; a medium connected before is ejected first.
func (s *Service) InsertMedia(w http.ResponseWriter, r *http.Request) error {
	const action = "VirtualMedia.InsertMedia"
	m, err := s.media()
	if err != nil {
		return err
	}
	obj, err := readParams(r, action, insertParams...)
	if err != nil {
		return err
	}
	var p struct{ image, method, proto, user, passwd string }
	for _, f := range []struct {
		name string
		dst  *string
	}{{"Image", &p.image}, {"TransferMethod", &p.method}, {"TransferProtocolType", &p.proto}, {"UserName", &p.user}, {"Password", &p.passwd}} {
		v, _, err := stringParam(obj, action, f.name)
		if err != nil {
			if f.name == "Password" {
				return paramType("", f.name, action)
			}
			return err
		}
		*f.dst = v
	}
	inserted, err := boolParam(obj, action, "Inserted", true)
	if err != nil {
		return err
	}
	wp, err := boolParam(obj, action, "WriteProtected", true)
	if err != nil {
		return err
	}
	p.image = strings.TrimSpace(p.image)
	if p.image == "" {
		return paramMissing(action, "Image")
	}
	if p.method != "" && p.method != "Upload" {
		return paramNotInList(p.method, "TransferMethod", action, []string{"Upload"})
	}
	name, rawURL := p.image, ""
	if u, err := url.Parse(p.image); err == nil && u.Scheme != "" {
		if err := checkSource(u, p.proto, action); err != nil {
			return err
		}
		if p.user != "" || p.passwd != "" {
			u.User = url.UserPassword(p.user, p.passwd)
		}
		rawURL = u.String()
		if name, err = s.download(r.Context(), m, rawURL); err != nil {
			return err
		}
	} else {
		if p.proto != "" || p.user != "" || p.passwd != "" {
			return &Error{Status: http.StatusBadRequest, ID: "ActionParameterNotSupported", Args: []string{"TransferProtocolType", action},
				Msg: "TransferProtocolType, UserName and Password are for an image given as a URL."}
		}
		if err := msd.CheckName(name); err != nil {
			return &Error{Status: http.StatusBadRequest, ID: "ActionParameterValueFormatError", Args: []string{name, "Image", action},
				Msg: "Image is neither an http(s) URL nor an image name (a file name in the storage).", Err: err}
		}
	}
	cdrom := strings.HasSuffix(strings.ToLower(name), ".iso")
	rw := !wp && !cdrom
	if d := m.State().Drive; d != nil && d.Connected {
		if err := m.SetConnected(false); err != nil && !errors.Is(err, msd.ErrDisconnected) {
			return mediaError(err)
		}
	}
	if err := m.SetParams(msd.Params{Image: &name, CDROM: &cdrom, RW: &rw}); err != nil {
		if errors.Is(err, msd.ErrUnknownImage) {
			return &Error{Status: http.StatusBadRequest, ID: "ActionParameterValueError", Args: []string{"Image", action},
				Msg: fmt.Sprintf("There is no image named '%s' in the storage.", name), Err: err}
		}
		return mediaError(err)
	}
	s.mu.Lock()
	if rawURL != "" {
		s.urls[name] = redact(p.image) // as the client gave it: Ansible ejects by it
	} else {
		delete(s.urls, name)
	}
	s.mu.Unlock()
	if inserted {
		if err := m.SetConnected(true); err != nil {
			return mediaError(err)
		}
	}
	s.cfg.Log.Info("redfish media inserted", "image", name, "url", redact(rawURL), "connected", inserted, "cdrom", cdrom, "rw", rw)
	return noContent(w)
}

// checkSource refuses a URL the daemon does not download: any scheme but
// http and https, a TransferProtocolType that is not the URL's.
func checkSource(u *url.URL, proto, action string) error {
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "http" && scheme != "https") || u.Host == "" {
		return paramNotInList(u.Scheme+"://...", "Image", action, []string{"http://...", "https://...", "an image name"})
	}
	if proto != "" && !strings.EqualFold(proto, scheme) {
		return paramNotInList(proto, "TransferProtocolType", action, []string{strings.ToUpper(scheme)})
	}
	return nil
}

// download fetches rawURL into the storage and returns its image name.
// One runs at a time; EjectMedia ends it.
func (s *Service) download(ctx context.Context, m Media, rawURL string) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.stopDownload != nil {
		s.mu.Unlock()
		return "", inUse("Another InsertMedia is downloading its image.", nil)
	}
	s.stopDownload = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.stopDownload = nil
		s.mu.Unlock()
	}()
	rem, err := msd.Fetch(ctx, rawURL, s.cfg.Remote)
	if err != nil {
		return "", mediaError(err)
	}
	defer rem.Body.Close()
	s.cfg.Log.Info("redfish: downloading an image", "url", redact(rawURL), "image", rem.Name, "size", rem.Size)
	if err := m.Download(ctx, rem, rem.Name, func(int64) {}); err != nil {
		var cut *msd.CutError
		if errors.As(err, &cut) && !errors.As(err, new(*msd.Error)) {
			why := "the image's server stopped sending or cut the connection"
			if errors.Is(err, context.Canceled) {
				why = "an EjectMedia, the client going away or its session ending stopped it"
			}
			return "", &Error{Status: http.StatusBadRequest, ID: "GeneralError", Err: err,
				Msg: fmt.Sprintf("The download stopped after %d of %d bytes (%s); nothing was kept.", cut.Written, cut.Size, why)}
		}
		return "", mediaError(err)
	}
	return rem.Name, nil
}

// EjectMedia answers POST .../VirtualMedia.EjectMedia: a download under way
// for an InsertMedia stops, the medium is disconnected and unchosen. With
// nothing inserted it does nothing (the eject of an empty drive).
func (s *Service) EjectMedia(w http.ResponseWriter, r *http.Request) error {
	m, err := s.media()
	if err != nil {
		return err
	}
	if _, err := readObject(r); err != nil {
		return err
	}
	s.mu.Lock()
	if s.stopDownload != nil {
		s.stopDownload()
	}
	s.mu.Unlock()
	d := m.State().Drive
	if d == nil {
		return mediaError(msd.ErrOffline)
	}
	if d.Connected {
		if err := m.SetConnected(false); err != nil && !errors.Is(err, msd.ErrDisconnected) {
			return mediaError(err)
		}
	}
	if d.Image != nil {
		empty := ""
		if err := m.SetParams(msd.Params{Image: &empty}); err != nil {
			return mediaError(err)
		}
		s.mu.Lock()
		delete(s.urls, d.Image.Name)
		s.mu.Unlock()
	}
	s.cfg.Log.Info("redfish media ejected", "user", s.cfg.Caller(r.Context()).User)
	return noContent(w)
}

// mediaError maps package msd's errors (kvmd's names) to Redfish's.
func mediaError(err error) *Error {
	var e *msd.Error
	if !errors.As(err, &e) {
		return &Error{Status: http.StatusInternalServerError, ID: "InternalError", Msg: "The virtual media operation failed.", Err: err}
	}
	re := &Error{Status: e.Status, ID: "GeneralError", Msg: e.Msg + " (" + e.Name + ")", Err: err}
	switch {
	case errors.Is(err, msd.ErrBusy), errors.Is(err, msd.ErrLocked):
		re.Status, re.ID = http.StatusConflict, "ResourceInUse"
	case errors.Is(err, msd.ErrImageExists):
		re.Status, re.ID = http.StatusConflict, "ResourceAlreadyExists"
		re.Resolution = "Remove the image from the storage (POST /api/msd/remove), or insert it by its name."
	case errors.Is(err, msd.ErrNoSpace):
		re.ID = "InsufficientStorage"
	case errors.Is(err, msd.ErrRemote):
		re.ID = "CouldNotEstablishConnection"
	case errors.Is(err, msd.ErrOffline), errors.Is(err, msd.ErrDisabled):
		re.Status, re.ID = http.StatusServiceUnavailable, "ServiceTemporarilyUnavailable"
	}
	return re
}

// redact drops a URL's password for the log and the resource.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return raw
	}
	return u.Redacted()
}
