// Package docs holds kvmd's manual: README.md at the top of the
// repository, the first page a user sees, and the pages of this directory
// it links to. There is no code here; the package's test checks that the
// README stays short, that every link in the manual resolves to a file
// (and heading) of the repository, and that no link leaves it.
package docs
