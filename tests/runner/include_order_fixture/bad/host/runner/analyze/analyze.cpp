// fixture: analyze/ and run/ are peers; neither includes the other (line 2)
#include "runner/run/run.hpp"
