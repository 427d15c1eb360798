package httpd

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"kvmd/auth"
)

// loginForm is the body of POST /api/auth/login.
type loginForm struct {
	user, passwd, expire, redirect string
}

// maxExpire bounds the login's expire so that it fits a time.Duration.
const maxExpire = 100 * 365 * 24 * 3600

// parseLogin reads a login body sent as a URL-encoded form, a multipart
// form or a JSON object.
func parseLogin(contentType string, body []byte) (loginForm, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return loginForm{}, BadRequest("Login needs a Content-Type of application/x-www-form-urlencoded, multipart/form-data or application/json", err)
	}
	var f loginForm
	switch mt {
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return f, BadRequest("Malformed form body", err)
		}
		f = loginForm{v.Get("user"), v.Get("passwd"), v.Get("expire"), v.Get("redirect")}
	case "multipart/form-data":
		return parseMultipartLogin(params["boundary"], body)
	case "application/json":
		var v struct {
			User     *string         `json:"user"`
			Passwd   *string         `json:"passwd"`
			Expire   json.RawMessage `json:"expire"`
			Redirect *string         `json:"redirect"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return f, BadRequest("Malformed JSON body: an object with user, passwd and expire is expected", err)
		}
		if v.User != nil {
			f.user = *v.User
		}
		if v.Passwd != nil {
			f.passwd = *v.Passwd
		}
		if v.Redirect != nil {
			f.redirect = *v.Redirect
		}
		if len(v.Expire) > 0 && string(v.Expire) != "null" {
			var s string
			if json.Unmarshal(v.Expire, &s) != nil {
				s = string(v.Expire)
			}
			f.expire = s
		}
	default:
		return f, BadRequest("Login needs a Content-Type of application/x-www-form-urlencoded, multipart/form-data or application/json", nil)
	}
	return f, nil
}

func parseMultipartLogin(boundary string, body []byte) (loginForm, error) {
	var f loginForm
	if boundary == "" {
		return f, BadRequest("Malformed multipart body: no boundary", nil)
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return f, nil
		}
		if err != nil {
			return f, BadRequest("Malformed multipart body", err)
		}
		v, err := io.ReadAll(p)
		if err != nil {
			return f, BadRequest("Malformed multipart body", err)
		}
		switch p.FormName() {
		case "user":
			f.user = string(v)
		case "passwd":
			f.passwd = string(v)
		case "expire":
			f.expire = string(v)
		case "redirect":
			f.redirect = string(v)
		}
	}
}

// loginRedirects are the values kvmd (4.108 on) takes for the login's
// redirect, its default allow_redirects; "" is no redirect. kvmd strips
// and lower-cases the value first (check_string_in_list).
var loginRedirects = []string{"", "/", "/kvm", "/kvm/"}

func parseRedirect(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if !slices.Contains(loginRedirects, s) {
		return "", BadParam("redirect", "not one of /, /kvm, /kvm/ (or empty)")
	}
	return s, nil
}

func parseExpire(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxExpire {
		return 0, BadParam("expire", "not a whole number of seconds from 0 to "+strconv.FormatInt(maxExpire, 10))
	}
	return time.Duration(n) * time.Second, nil
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) error {
	body, err := requestBody(r)
	if err != nil {
		return BadRequest("Request body could not be read", err)
	}
	f, err := parseLogin(r.Header.Get("Content-Type"), body)
	if err != nil {
		return err
	}
	user, err := checkUser("user", f.user)
	if err != nil {
		return err
	}
	if err := checkPasswd("passwd", f.passwd); err != nil {
		return err
	}
	expire, err := parseExpire(f.expire)
	if err != nil {
		return err
	}
	redirect, err := parseRedirect(f.redirect)
	if err != nil {
		return err
	}
	setIdentity(r.Context(), Identity{User: user, Method: auth.MethodLogin})
	token, life, err := s.cfg.Auth.Login(r.Context(), user, f.passwd, expire, s.clientAddr(r))
	if err != nil {
		return authError(err)
	}
	c := &http.Cookie{
		Name: "auth_token", Value: token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r),
	}
	if life > 0 {
		c.MaxAge = int(min(life/time.Second, math.MaxInt32)) // int is 32 bits on ARMv6/v7
	}
	http.SetCookie(w, c)
	if redirect != "" {
		// The HTML form recipe: a form, maybe on another site, posts here
		// and the browser lands on the page with the cookie set. The
		// cookie is SameSite=Strict, so that first page load (still part
		// of a navigation another site started) goes without it; the
		// login page it is sent to finds the session and moves on
		// (web/static/login.js). docs/security.md: "Logging in from another page".
		w.Header().Set("Location", redirect)
		w.WriteHeader(http.StatusFound)
		return nil
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) error {
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// logout ends the session of the cookie the request carries, whatever
// authenticated it, and clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) error {
	id := IdentityFrom(r.Context())
	if token, _, err := sessionToken(r); err == nil && token != "" {
		s.cfg.Auth.Logout(token, id.User, s.clientAddr(r))
	}
	http.SetCookie(w, &http.Cookie{
		Name: "auth_token", Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r),
	})
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) secure(r *http.Request) bool {
	if ci := connInfoFrom(r.Context()); ci != nil {
		return ci.secure
	}
	return r.TLS != nil
}
