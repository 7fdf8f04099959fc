#include "relay_shims.h"
