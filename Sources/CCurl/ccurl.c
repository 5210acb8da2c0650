#include "ccurl.h"
