#ifndef RELAY_SHIMS_H
#define RELAY_SHIMS_H
#include <uv.h>
#include <openssl/evp.h>
#endif
