// fixture
#pragma once
