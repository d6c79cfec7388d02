package linmem

import "syscall"

// mapNoReserve keeps a large reservation from counting against overcommit
// limits until its pages are touched.
const mapNoReserve = syscall.MAP_NORESERVE
