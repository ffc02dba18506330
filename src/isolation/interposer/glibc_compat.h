#pragma once
/// The interposer's glibc floor is 2.17 (docs/isolation.md, "Images it loads in"): every symbol it
/// imports must carry a version that glibc 2.17 already had, or the dynamic loader refuses the
/// library in older images (Ubuntu 20.04, UBI 8, CentOS 7) with "version `GLIBC_2.34' not found".
///
/// glibc 2.34 moved dlopen, dlvsym, dlerror, pthread_once, pthread_create and pthread_detach into libc under new versions and kept
/// the old ones as compatibility symbols, so binding to the old version works on every glibc: on
/// >= 2.34 libc answers, on older ones libdl / libpthread (which the library lists as needed). fstat
/// (GLIBC_2.33) is avoided altogether (region.cpp uses the system call). Include this header in
/// every translation unit of the interposer that calls one of these; a ctest reads the library's
/// version needs and fails on anything newer than GLIBC_2.17.
#include <dlfcn.h>
#include <pthread.h>

#if defined(__GLIBC__)
#if defined(__x86_64__)
#define TESSERA_GLIBC_BASE_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define TESSERA_GLIBC_BASE_VERSION "GLIBC_2.17"
#endif
#endif

#ifdef TESSERA_GLIBC_BASE_VERSION
__asm__(".symver dlopen,dlopen@" TESSERA_GLIBC_BASE_VERSION);
__asm__(".symver dlvsym,dlvsym@" TESSERA_GLIBC_BASE_VERSION);
__asm__(".symver dlerror,dlerror@" TESSERA_GLIBC_BASE_VERSION);
__asm__(".symver pthread_once,pthread_once@" TESSERA_GLIBC_BASE_VERSION);
// The compute limit's watcher thread (core_limit.cpp).
__asm__(".symver pthread_create,pthread_create@" TESSERA_GLIBC_BASE_VERSION);
__asm__(".symver pthread_detach,pthread_detach@" TESSERA_GLIBC_BASE_VERSION);
#endif
