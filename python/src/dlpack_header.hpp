// DLPack's header, where the build found it (RESHARD_HAVE_DLPACK=1); otherwise RESHARD_HAVE_DLPACK is 0 and the
// readers of capsules are left out.
#pragma once

#ifndef RESHARD_HAVE_DLPACK
#define RESHARD_HAVE_DLPACK 0
#endif
#if RESHARD_HAVE_DLPACK
#include <dlpack/dlpack.h>
#endif
