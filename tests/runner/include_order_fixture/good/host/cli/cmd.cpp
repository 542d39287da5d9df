// fixture: an entry header
#include "runner/run/run.hpp"
